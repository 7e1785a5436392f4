"""Behaviour cloning: the learned router starts as the best rule, not as a random policy.

Beyond the paper (issue 19: "start from the best heuristic by behaviour cloning and fine-tune with
PPO, so it begins no worse than the rule it learned from"). The teacher runs every demonstration
episode (a draw of the training
:class:`~hetsched.slim.router_training.scenario_mix.ScenarioMix`) through the environment, which
records the observation, action mask, the teacher's action and the reward each decision was
credited. With several candidate teachers, each runs on its own copy of the episode first and the
best one on that episode is recorded; or a rollout picks the teacher per chunk of decisions
(:mod:`~hetsched.slim.router_training.teachers`). The policy's heads are then fitted to the
teacher's actions (cross-entropy, masked like the policy acts) and its value head to the credited
rewards (the one-step return of eq. 8), so PPO's first advantages are not measured against a
random critic.

A teacher action the mask forbids (a pair predicted to miss the deadline when another fits) cannot
be imitated; such steps still run (the episode stays the teacher's) but are left out of the fit
and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
from rich.progress import Progress

from hetsched.rl import FactoredActorCritic
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.teachers import FixedTeacher, Labeller, RolloutTeacher
from hetsched.slim.router_training.validation import EpisodeScore, TeacherPick
from hetsched.slim.routers.base import Router
from hetsched.slim.routers.specs import create_router
from hetsched.slim.sim.future_arrivals import FutureSampler

ClusterFactory = Callable[[int], SlimCluster]
"""episode seed -> a fresh cluster with that episode's workload."""


@dataclass
class Demonstrations:
    """The teacher's decisions on the demonstration episodes."""

    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    teachers: dict[str, int] = field(default_factory=dict)
    """Episodes each rule was the best on (chunks each rule labelled, with a rollout teacher)."""
    masked_out: int = 0
    """Teacher actions the mask forbade (run, not imitated)."""

    def __len__(self) -> int:
        return len(self.actions)


def record_episode(
    env: SlimRoutingEnv,
    labeller: Labeller,
    seed: int,
    into: Demonstrations,
    driver: Router | None = None,
) -> None:
    """Runs one episode through ``env`` and appends, for every decision, the action that
    imitates the rule ``labeller`` names there (one rule, or a rollout's pick per chunk).

    Without ``driver`` the teacher also acts (plain behaviour cloning). With one, the driver
    acts and the teacher only labels (DAgger, Ross et al. 2011): the states recorded are the
    ones the driver's own mistakes lead to, which cloning from the teacher's episodes never
    shows (a clone that follows SlackFit a little too long into an overload has never seen the
    queues that follow, nor what the teacher does about them).
    """
    encoder = env.encoder
    obs, info = env.reset(seed=seed)
    index_of: dict[int, int] = {}  # decision id -> row in ``into`` (rewards arrive later)
    pending_rewards: dict[int, float] = {}
    terminated = False
    decision = 0
    while not terminated:
        assert env.cluster is not None
        teacher_name, teacher = labeller.teacher(decision, env.cluster)
        decision += 1
        action = encoder.imitation(teacher_name, teacher.decide(env.router_state))
        acted = action if driver is None else encoder.action(driver.decide(env.router_state))
        decision_id, mask = info["decision_id"], info["action_mask"]
        if _allowed(action, mask, encoder.head_sizes):
            index_of[decision_id] = len(into.actions)
            into.obs.append(obs)
            into.masks.append(mask)
            into.actions.append(action)
            into.rewards.append(0.0)
        else:
            into.masked_out += 1
        obs, _reward, terminated, _truncated, info = env.step(acted)
        pending_rewards.update(dict(info["reward_credits"]))
    for decision_id, reward in pending_rewards.items():
        if decision_id in index_of:
            into.rewards[index_of[decision_id]] = reward


def _fixed_episode(make_cluster: ClusterFactory, seed: int, _drawn_seed: int) -> SlimCluster:
    """The cluster of episode ``seed`` whatever seed the environment draws (a replay)."""
    return make_cluster(seed)


def _allowed(action: np.ndarray, mask: np.ndarray, head_sizes: tuple[int, ...]) -> bool:
    """Whether every head's part of ``action`` is valid under the flat ``mask``."""
    offsets = np.cumsum((0, *head_sizes[:-1]))
    return bool(all(mask[offset + a] for offset, a in zip(offsets, action, strict=True)))


def collect_demonstrations(
    make_env: Callable[[ClusterFactory], SlimRoutingEnv],
    make_cluster: ClusterFactory,
    teachers: tuple[str, ...],
    seeds: list[int],
    score: Callable[[SlimCluster, Router], EpisodeScore],
    *,
    choice: TeacherPick = TeacherPick(),
    driver: Router | None = None,
    progress: bool = False,
    into: Demonstrations | None = None,
    rollout_chunk: int = 0,
    rollout_horizon: int | None = None,
    futures: Callable[[int], FutureSampler] | None = None,
    rollout_samples: int = 1,
) -> Demonstrations:
    """The teacher's decisions on each episode of ``seeds`` (of the best of several teachers on
    that episode, or with ``rollout_chunk`` of the best by rollout per chunk of decisions).

    Args:
        make_env: Builds the recording environment around a cluster factory.
        make_cluster: The training distribution (episode seed -> cluster).
        teachers: Rule names: the teacher, or the candidates of each episode.
        seeds: Demonstration episode seeds.
        score: Scores a rule on a fresh cluster (used with several teachers).
        choice: How the scores pick each episode's teacher (:class:`TeacherPick`).
        driver: A policy that acts while the teachers only label (see :func:`record_episode`).
        into: Demonstrations to append to (default: new ones).
        rollout_chunk: 0: one teacher per episode; else decisions per chunk of a
            :class:`~hetsched.slim.router_training.teachers.RolloutTeacher` over ``teachers``
            (``demos.teachers`` then counts chunks, not episodes).
        rollout_horizon: Decisions per rollout (None: to the episode's end).
        futures: None: rollouts see the episode's own future; else episode seed -> the sampler
            of drawn futures for that episode's scenario.
        rollout_samples: Drawn futures per candidate and chunk (with ``futures``).
    """
    demos = Demonstrations() if into is None else into
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("demonstrations", total=len(seeds))
        for seed in seeds:
            env = make_env(partial(_fixed_episode, make_cluster, seed))
            if rollout_chunk:
                sampler = None if futures is None else futures(seed)
                rollout = RolloutTeacher(teachers, seed, rollout_chunk, choice, rollout_horizon,
                                         sampler, rollout_samples)  # fmt: skip
                record_episode(env, rollout, seed, demos, driver)
                labelled = rollout.chunks
            else:
                scores = {
                    name: score(make_cluster(seed), create_router(name, seed))
                    for name in (teachers if len(teachers) > 1 else ())
                }
                teacher = choice.pick(scores) if scores else teachers[0]
                record_episode(env, FixedTeacher(teacher, seed), seed, demos, driver)
                labelled = {teacher: 1}
            for name, count in labelled.items():
                demos.teachers[name] = demos.teachers.get(name, 0) + count
            bar.advance(task)
    return demos


def clone(
    policy: FactoredActorCritic,
    demos: Demonstrations,
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int = 256,
    value_weight: float = 0.5,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Fits the policy heads to the teacher (cross-entropy) and the value head to the credited
    rewards (mean squared error); returns per-epoch loss and agreement (share of demonstrated
    decisions whose every head's most likely action is the teacher's)."""
    if len(demos) == 0:
        raise ValueError("no demonstrations to clone")
    generator = torch.Generator().manual_seed(seed)
    obs = torch.as_tensor(np.stack(demos.obs), dtype=torch.float32)
    masks = torch.as_tensor(np.stack(demos.masks), dtype=torch.bool)
    actions = torch.as_tensor(np.stack(demos.actions), dtype=torch.int64)
    rewards = torch.as_tensor(demos.rewards, dtype=torch.float32)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    history = []
    for epoch in range(epochs):
        order = torch.randperm(len(demos), generator=generator)
        total_loss = 0.0
        for start in range(0, len(demos), batch_size):
            rows = order[start : start + batch_size]
            dist, value = policy.distribution(obs[rows], masks[rows])
            imitation = -dist.log_prob(actions[rows]).mean()
            value_loss = ((value - rewards[rows]) ** 2).mean()
            loss = imitation + value_weight * value_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(rows)
        with torch.no_grad():
            dist, _ = policy.distribution(obs, masks)
            agreement = (dist.mode() == actions).all(dim=-1).float().mean().item()
        history.append(
            {"epoch": float(epoch + 1), "loss": total_loss / len(demos), "agreement": agreement}
        )
    return history
