"""Training a jobs agent with PPO (RLTune §3.1.1, Figs. 8 and 11; RLScheduler; SchedInspector).

One trajectory = one episode (:mod:`.episodes`: 256 jobs from a random start of the training
part) under the agent's decision policy. Every ``trajectories_per_update`` trajectories the agent
is updated with the shared PPO of :mod:`hetsched.rl` (clipped surrogate, ε = 0.2; GAE with
γ = λ = 1 by default, see ``TrainConfig.gae_lambda``; advantages normalised over the batch); an
epoch is ``trajectories_per_epoch`` trajectories (100 in the paper). The agents differ in their
network, observation and decision (:data:`.train_config.AGENTS`: which job to start next, or
whether to accept the base policy's pick) and their reward: RLTune's and SchedInspector's is the
episode's normalised gap to the base policy, RLScheduler's the negated metric (scaled by its
running standard deviation, so that one set of PPO settings serves seconds of wait and BSLD
alike). Each epoch records the mean normalised gap, the Fig. 11 curve: the agent's improvement
over the base policy, in [-1, 1].

Several trajectories go into each update because the reward arrives once per episode: with one
trajectory, normalising the advantages would erase whether that episode was better or worse than
the base policy.

The trajectories of one update are played with the same weights by a rollout backend
(:mod:`.rollouts`: in this process, or Ray actors with :mod:`.ray_rollouts`), each from seeds of
its own (seed, epoch, number), so a run gives the same agent with any number of workers; the
learner (this module) alone updates the weights.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from hetsched.core.seeding import seed_everything
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.rl.agent import JobsAgent, save_checkpoint
from hetsched.jobs.rl.episodes import EpisodeOutcome, check_metric
from hetsched.jobs.rl.inspector import REJECT
from hetsched.jobs.rl.inspector_agent import InspectorAgent
from hetsched.jobs.rl.rollouts import (
    RolloutBackend,
    RolloutWorker,
    Trajectory,
    TrajectoryTask,
    agent_weights,
    build_agent,
)
from hetsched.jobs.rl.train_config import AGENTS, TrainConfig
from hetsched.jobs.traces.job_table import JobTable
from hetsched.rl import RolloutBatch, compute_gae, ppo_update
from hetsched.rl.advantages import RunningStd


@dataclass
class TrainingRun:
    """The trained agent, one record per epoch, and where the final checkpoint is."""

    agent: JobsAgent
    history: list[dict[str, float]]
    checkpoint: Path


def inspector_stats(agent: JobsAgent, actions: list[int]) -> dict[str, float]:
    """For an inspector, the share of its sampled verdicts that were rejections (what it learns
    first: a hold idles GPUs until the next event); nothing for a queue scorer."""
    if not isinstance(agent, InspectorAgent):
        return {}
    return {"reject_share": float(np.mean(np.asarray(actions) == REJECT))}


def to_batch(
    trajectories: list[Trajectory], config: TrainConfig, reward_scale: float = 1.0
) -> RolloutBatch:
    """Stacks trajectories with their GAE advantages (no bootstrap: each one ended); rewards are
    multiplied by ``reward_scale`` first."""
    advantages, returns = [], []
    for t in trajectories:
        ends = torch.zeros(len(t.rewards), dtype=torch.bool)
        ends[-1] = True
        adv, ret = compute_gae(
            torch.tensor(t.rewards) * reward_scale,
            torch.tensor(t.values),
            ends,
            0.0,
            config.gamma,
            config.gae_lambda,
        )
        advantages.append(adv)
        returns.append(ret)
    obs = np.stack([o for t in trajectories for o in t.obs])
    masks = np.stack([m for t in trajectories for m in t.masks])
    actions = [a for t in trajectories for a in t.actions]
    return RolloutBatch(
        obs=torch.from_numpy(obs),
        actions=torch.tensor(actions, dtype=torch.int64),
        log_probs=torch.tensor([p for t in trajectories for p in t.log_probs]),
        values=torch.tensor([v for t in trajectories for v in t.values]),
        advantages=torch.cat(advantages).float(),
        returns=torch.cat(returns).float(),
        epsilons=torch.zeros(len(actions)),
        masks=torch.from_numpy(masks),
    )


def update_tasks(epoch: int, config: TrainConfig) -> list[list[TrajectoryTask]]:
    """The epoch's trajectories grouped by PPO update: ``trajectories_per_update`` each, the last
    group shorter when they do not divide the epoch. The trajectories of one group are played with
    the same weights, so they are what the workers can play at once."""
    per_update, per_epoch = config.trajectories_per_update, config.trajectories_per_epoch
    return [
        [
            TrajectoryTask(epoch, number)
            for number in range(first, min(first + per_update, per_epoch))
        ]
        for first in range(0, per_epoch, per_update)
    ]


def train_agent(
    jobs: JobTable,
    cluster: Cluster,
    config: TrainConfig,
    out_dir: Path,
    on_trajectory: Callable[[int, EpisodeOutcome], None] | None = None,
    rollouts: RolloutBackend | None = None,
) -> TrainingRun:
    """Trains an agent on ``jobs`` (the training part) and writes checkpoints and curves.

    This is the one learner: ``rollouts`` plays each update's trajectories with the current weights
    (default: one :class:`RolloutWorker` in this process; :mod:`.ray_rollouts` for Ray actors) and
    returns them in order, so the result depends on ``config`` only, not on the backend.

    Writes ``checkpoints/epoch_NNN.pt`` after every epoch, ``agent.pt`` at the end, and
    ``training.json`` / ``training.csv`` (one row per epoch) as it goes.
    """
    check_metric(config.metric)
    seed_everything(config.seed)
    reward = AGENTS[config.agent]
    agent = build_agent(config)
    workers = rollouts if rollouts is not None else RolloutWorker(jobs, cluster, config)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)
    ppo = config.ppo()
    # A reward on the metric's own scale (RLScheduler's) is divided by its running std, so the
    # critic's targets stay near unit scale; the normalised gap is already in [-1, 1].
    reward_std = RunningStd()
    meta = {
        "agent": config.agent,
        "base_policy": config.base_policy,
        "metric": config.metric,
        "seed": config.seed,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, float]] = []
    done_trajectories = 0
    for epoch in range(1, config.epochs + 1):
        outcomes: list[EpisodeOutcome] = []
        actions: list[int] = []
        stats: dict[str, float] = {}
        for tasks in update_tasks(epoch, config):
            trajectories = workers.run(agent_weights(agent), tasks)
            for trajectory in trajectories:
                done_trajectories += 1
                outcomes.append(trajectory.outcome)
                actions += trajectory.actions
                reward_std.update([trajectory.outcome.reward])
                if on_trajectory is not None:
                    on_trajectory(done_trajectories, trajectory.outcome)
            scale = 1.0 if reward == "gap" else 1.0 / (reward_std.std + 1e-8)
            stats = ppo_update(agent, optimizer, to_batch(trajectories, config, scale), ppo)
        history.append(
            {
                "epoch": epoch,
                "trajectories": done_trajectories,
                "improvement": float(np.mean([o.improvement for o in outcomes])),
                "improvement_std": float(np.std([o.improvement for o in outcomes])),
                "reward": float(np.mean([o.reward for o in outcomes])),
                "base_metric": float(np.mean([o.base for o in outcomes])),
                "rl_metric": float(np.mean([o.rl for o in outcomes])),
                "decisions_per_episode": float(np.mean([o.decisions for o in outcomes])),
                **inspector_stats(agent, actions),
                **stats,
            }
        )
        save_checkpoint(out_dir / "checkpoints" / f"epoch_{epoch:03d}.pt", agent, meta)
        write_history(out_dir, config, history)
    checkpoint = out_dir / "agent.pt"
    save_checkpoint(checkpoint, agent, {**meta, "epochs": config.epochs})
    return TrainingRun(agent, history, checkpoint)


def write_history(out_dir: Path, config: TrainConfig, history: list[dict[str, float]]) -> None:
    """``training.json`` (config + epochs) and ``training.csv`` (one row per epoch)."""
    (out_dir / "training.json").write_text(
        json.dumps({"config": config.model_dump(), "epochs": history}, indent=2)
    )
    with (out_dir / "training.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(history[0]))
        writer.writeheader()
        writer.writerows(history)


def plot_training_curve(history: list[dict[str, float]], title: str, path: Path) -> None:
    """Fig. 11: the agent's improvement over the base policy per epoch (%), mean ± std."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [h["epoch"] for h in history]
    mean = np.array([h["improvement"] for h in history]) * 100.0
    std = np.array([h["improvement_std"] for h in history]) * 100.0
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(epochs, mean, marker="o")
    ax.fill_between(epochs, mean - std, mean + std, alpha=0.2)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("improvement over base (%)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
