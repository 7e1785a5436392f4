"""Training a jobs agent with PPO (RLTune §3.1.1, Figs. 8 and 11; RLScheduler; SchedInspector).

One trajectory = one episode (:mod:`.episodes`: 256 jobs from a random start of the training
part) under the agent's decision policy. Every ``trajectories_per_update`` trajectories the agent
is updated with the shared PPO of :mod:`hetsched.rl` (clipped surrogate, ε = 0.2; GAE with
γ = λ = 1 by default, see ``TrainConfig.gae_lambda``; advantages normalised over the batch); an
epoch is ``trajectories_per_epoch`` trajectories (100 in the paper). The agents differ in their
network, observation and decision (:data:`AGENTS`: which job to start next, or whether to accept
the base policy's pick) and their reward: RLTune's and SchedInspector's is the episode's
normalised gap to the base policy, RLScheduler's the negated metric (scaled by its running standard
deviation, so that one set of PPO settings serves seconds of wait and BSLD alike). Each epoch
records the mean normalised gap, the Fig. 11 curve: the agent's improvement over the base policy,
in [-1, 1].

Several trajectories go into each update because the reward arrives once per episode: with one
trajectory, normalising the advantages would erase whether that episode was better or worse than
the base policy.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from pydantic import Field, field_validator

from hetsched.core.config import StrictModel
from hetsched.core.errors import UnknownNameError
from hetsched.core.seeding import seed_everything
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.agent import JobsAgent, JobScoringAgent, save_checkpoint
from hetsched.jobs.rl.environment import DecisionPolicy
from hetsched.jobs.rl.episodes import (
    Chooser,
    DecidingPolicy,
    EpisodeOutcome,
    EpisodeSampler,
    check_metric,
)
from hetsched.jobs.rl.inspector import REJECT, InspectorPolicy
from hetsched.jobs.rl.inspector_agent import InspectorAgent
from hetsched.jobs.rl.inspector_features import INSPECTOR_QUEUE, MAX_REJECTIONS
from hetsched.jobs.traces.job_table import JobTable
from hetsched.rl import PPOConfig, RolloutBatch, compute_gae, ppo_update
from hetsched.rl.advantages import RunningStd

#: ``--agent`` name -> its reward (:mod:`.episodes`).
AGENTS: dict[str, str] = {"rltune": "gap", "rlscheduler": "metric", "schedinspector": "gap"}


def check_agent(agent: str) -> str:
    """Returns ``agent`` if known.

    Raises:
        UnknownNameError: Naming the unknown agent and the known ones.
    """
    if agent not in AGENTS:
        raise UnknownNameError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    return agent


class TrainConfig(StrictModel, use_attribute_docstrings=True):
    """What ``hetsched jobs train`` trains; defaults follow the paper where it gives a value."""

    agent: str = "rltune"
    """``rltune`` (RLTune's prioritiser), ``rlscheduler`` (RLScheduler's kernel) or
    ``schedinspector`` (SchedInspector over the base policy)."""
    base_policy: str = "fcfs"
    """Policy the reward compares with (FIFO = ``fcfs``, ``sjf``, ``f1``, ``wfp3``, ...)."""
    metric: str = "wait"
    """``wait``, ``jct``, ``bsld`` or ``util``."""
    epochs: int = Field(10, ge=1)
    """Training epochs."""
    trajectories_per_epoch: int = Field(100, ge=1)
    """Trajectories (episodes) per epoch (paper: 100)."""
    trajectories_per_update: int = Field(4, ge=1)
    """Trajectories per PPO update."""
    episode_jobs: int = Field(256, ge=2)
    """Jobs per episode (paper: 256)."""
    max_queue: int | None = Field(None, ge=1)
    """Visible queue slots (None: the agent's paper's window, RLTune 256, RLScheduler 128)."""
    placer: str = "pack"
    """Placer of both pipelines: ``pack``, ``spread`` or ``milp``."""
    seed: int = 0
    """Seeds torch, NumPy and the episode starts."""
    learning_rate: float = Field(1e-3, gt=0)
    """Adam learning rate (actor and critic)."""
    update_epochs: int = Field(4, ge=1)
    """PPO epochs over each batch."""
    num_minibatches: int = Field(4, ge=1)
    """Minibatches per PPO epoch."""
    gamma: float = Field(1.0, ge=0, le=1)
    """Discount: 1, the reward is one episode-level score."""
    gae_lambda: float = Field(1.0, ge=0, le=1)
    """GAE λ. 1 (Monte Carlo: every decision's advantage is the episode's reward minus V(s)) because
    the reward arrives only at the end: with λ = 0.97 and ~150 decisions per episode the reward
    reaches the early decisions with weight 0.97^150 ≈ 0.01 and they learn from the untrained
    critic's noise (on synthetic Philly that agent ended 49 % worse than FIFO, the λ = 1 one 27 %
    better)."""
    clip_coef: float = Field(0.2, gt=0)
    """PPO clip ε."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus weight."""
    vf_coef: float = Field(0.5, ge=0)
    """Value-loss weight."""
    actor_hidden: tuple[int, ...] | None = None
    """Hidden widths of the per-job scoring MLP (None: the agent's paper's)."""
    critic_hidden: tuple[int, ...] | None = None
    """Hidden widths of the critic MLP (None: the agent's paper's; the inspector's critic has its
    actor's widths)."""
    max_rejections: int = Field(MAX_REJECTIONS, ge=1)
    """SchedInspector: consecutive rejections after which the pick is accepted unasked."""

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, agent: str) -> str:
        return check_agent(agent)

    def ppo(self) -> PPOConfig:
        """The shared PPO's config for the update step."""
        return PPOConfig(
            seed=self.seed,
            num_steps=max(self.num_minibatches, 1),
            learning_rate=self.learning_rate,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            num_minibatches=self.num_minibatches,
            update_epochs=self.update_epochs,
            clip_coef=self.clip_coef,
            ent_coef=self.ent_coef,
            vf_coef=self.vf_coef,
        )


@dataclass
class Trajectory:
    """One episode's decisions and its outcome."""

    outcome: EpisodeOutcome
    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


@dataclass
class TrainingRun:
    """The trained agent, one record per epoch, and where the final checkpoint is."""

    agent: JobsAgent
    history: list[dict[str, float]]
    checkpoint: Path


def build_agent(config: TrainConfig) -> JobsAgent:
    """A fresh agent of ``config.agent`` with the config's window and widths (or its paper's)."""
    if config.agent == InspectorAgent.KIND:
        return InspectorAgent(
            config.max_queue or INSPECTOR_QUEUE,
            config.actor_hidden or (32, 16),
            config.max_rejections,
        )
    return JobScoringAgent(
        config.max_queue, config.actor_hidden, config.critic_hidden, feature_set=config.agent
    )


def episode_policy(agent: JobsAgent, base_policy: str) -> Callable[[Chooser], DecidingPolicy]:
    """How an episode asks ``agent``: a fresh decision policy around a chooser (the inspector's
    over a fresh ``base_policy``)."""
    if isinstance(agent, InspectorAgent):
        return lambda choose: InspectorPolicy(
            make_policy(base_policy), choose, agent.max_queue, agent.max_rejections
        )
    return lambda choose: DecisionPolicy(choose, agent.max_queue, agent.feature_set)


def inspector_stats(agent: JobsAgent, actions: list[int]) -> dict[str, float]:
    """For an inspector, the share of its sampled verdicts that were rejections (what it learns
    first: a hold idles GPUs until the next event); nothing for a queue scorer."""
    if not isinstance(agent, InspectorAgent):
        return {}
    return {"reject_share": float(np.mean(np.asarray(actions) == REJECT))}


def rollout(
    episodes: EpisodeSampler,
    agent: JobsAgent,
    policy_for: Callable[[Chooser], DecidingPolicy],
) -> Trajectory:
    """Plays one episode with actions sampled from the agent's masked softmax."""
    obs_seen: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    log_probs: list[float] = []
    values: list[float] = []

    def choose(obs: np.ndarray, mask: np.ndarray) -> int:
        with torch.no_grad():
            out = agent.get_action_and_value(
                torch.from_numpy(obs).unsqueeze(0), torch.from_numpy(mask).unsqueeze(0)
            )
        obs_seen.append(obs)
        masks.append(mask)
        actions.append(int(out.action.item()))
        log_probs.append(out.log_prob.item())
        values.append(out.value.item())
        return actions[-1]

    outcome = episodes.play(lambda: policy_for(choose))
    rewards = [0.0] * len(actions)
    rewards[-1] = outcome.reward  # the episode's one reward (RLTune section 3.2)
    return Trajectory(outcome, obs_seen, masks, actions, log_probs, values, rewards)


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


def train_agent(
    jobs: JobTable,
    cluster: Cluster,
    config: TrainConfig,
    out_dir: Path,
    on_trajectory: Callable[[int, EpisodeOutcome], None] | None = None,
) -> TrainingRun:
    """Trains an agent on ``jobs`` (the training part) and writes checkpoints and curves.

    Writes ``checkpoints/epoch_NNN.pt`` after every epoch, ``agent.pt`` at the end, and
    ``training.json`` / ``training.csv`` (one row per epoch) as it goes.
    """
    check_metric(config.metric)
    seed_everything(config.seed)
    reward = AGENTS[config.agent]
    episodes = EpisodeSampler(
        jobs,
        cluster,
        config.base_policy,
        config.metric,
        config.episode_jobs,
        config.placer,
        reward,
    )
    episodes.seed_starts(config.seed)
    agent = build_agent(config)
    policy_for = episode_policy(agent, config.base_policy)
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
        pending: list[Trajectory] = []
        stats: dict[str, float] = {}
        for index in range(config.trajectories_per_epoch):
            trajectory = rollout(episodes, agent, policy_for)
            done_trajectories += 1
            outcomes.append(trajectory.outcome)
            actions += trajectory.actions
            pending.append(trajectory)
            reward_std.update([trajectory.outcome.reward])
            if on_trajectory is not None:
                on_trajectory(done_trajectories, trajectory.outcome)
            last = index == config.trajectories_per_epoch - 1
            if len(pending) == config.trajectories_per_update or last:
                scale = 1.0 if reward == "gap" else 1.0 / (reward_std.std + 1e-8)
                stats = ppo_update(agent, optimizer, to_batch(pending, config, scale), ppo)
                pending = []
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
