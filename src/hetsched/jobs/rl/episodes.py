"""Training episodes shared by the three jobs agents (RLTune, RLScheduler, SchedInspector).

An episode replays ``episode_jobs`` consecutive jobs from a random start of the training part on
an empty cluster (RLTune section 3.1.1 and RLScheduler's "sampled job sequences": 256 jobs each),
under a policy that asks the agent at its decision points. The reward comes once, at the end, and
compares the episode with the same jobs under the base policy (cached per start):

- ``gap`` (RLTune section 3.2, SchedInspector's "improvement over the base policy"): the normalised
  gap ``(base − agent) / max(base, agent, 1)`` of the chosen metric, sign flipped for utilisation;
- ``metric`` (RLScheduler section 4.4): the chosen metric itself, negated when lower is better, so
  the agent maximises ``−(average BSLD)`` as RLScheduler does. The base run is then only reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.seeding import make_rng
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import JobTable

MAX_REDRAWS = 20
"""Random starts tried before giving up on finding an episode with a decision in it."""
NO_DECISION = (
    f"no episode offered the agent a decision in {MAX_REDRAWS} random starts; the cluster is too"
    " large for this trace (try a smaller --cluster-fraction or a higher --arrival-compression)"
)
#: Metric name -> (summary key, True when lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "wait": ("wait_s", True),
    "jct": ("jct_s", True),
    "bsld": ("bsld", True),
    "util": ("utilisation_pct", False),
}
#: Reward name -> what it is (see the module docstring).
REWARDS: dict[str, str] = {
    "gap": "normalised gap to the base policy",
    "metric": "the metric, signed so that higher is better",
}


def check_metric(metric: str) -> str:
    """Returns ``metric`` if known.

    Raises:
        HetschedError: Naming the unknown metric and the known ones.
    """
    if metric not in METRICS:
        raise HetschedError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    return metric


def metric_value(result: SimulationResult, metric: str) -> float:
    """The episode's mean ``metric`` (utilisation in %)."""
    return float(result.summary()[METRICS[check_metric(metric)][0]])


def normalised_gap(base: float, rl: float, metric: str) -> float:
    """(base − rl) / max(base, rl, 1) for lower-is-better metrics, (rl − base) / ... otherwise."""
    gap = (base - rl) if METRICS[check_metric(metric)][1] else (rl - base)
    return gap / max(base, rl, 1.0)


def signed_metric(value: float, metric: str) -> float:
    """``value`` negated when lower is better: RLScheduler's reward, higher = better."""
    return -value if METRICS[check_metric(metric)][1] else value


Chooser = Callable[[np.ndarray, np.ndarray], int]
"""``(flat observation, action mask) -> action``: how a policy asks an agent."""


class DecidingPolicy(PriorityPolicy, Protocol):
    """A priority policy that asks an agent at its decision points and counts them."""

    decisions: int


@dataclass
class EpisodeOutcome:
    """Base and agent metric of a finished episode, its reward and the improvement (the
    normalised gap, whatever the reward)."""

    start: int
    base: float
    rl: float
    reward: float
    decisions: int
    improvement: float


class EpisodeSampler:
    """Random episodes of the training jobs, each with its base-policy reference.

    Args:
        jobs: Training jobs (requested times filled), in submission order.
        cluster: The cluster.
        base_policy: Registered policy the reward compares with (``fcfs``, ``sjf``, ...).
        metric: ``wait``, ``jct``, ``bsld`` or ``util``.
        episode_jobs: Jobs per episode (256 in the papers).
        placer: Placer of both pipelines (``pack``, ``spread``, ``milp``).
        reward: ``gap`` or ``metric`` (see the module docstring).

    Raises:
        HetschedError: For an unknown metric or reward, or episodes longer than the trace.
        UnknownNameError: For an unknown base policy.
    """

    def __init__(
        self,
        jobs: JobTable,
        cluster: Cluster,
        base_policy: str = "fcfs",
        metric: str = "wait",
        episode_jobs: int = 256,
        placer: str = "pack",
        reward: str = "gap",
    ) -> None:
        self.metric = check_metric(metric)
        if reward not in REWARDS:
            raise HetschedError(f"unknown reward {reward!r}; known: {', '.join(REWARDS)}")
        make_policy(base_policy)  # an unknown name fails here, listing the known ones
        if episode_jobs < 2 or episode_jobs > len(jobs):
            raise HetschedError(
                f"episodes of {episode_jobs} jobs need a trace of at least that many (>= 2);"
                f" the training part has {len(jobs)}"
            )
        self.jobs, self.cluster = jobs, cluster
        self.base_policy, self.episode_jobs, self.reward = base_policy, episode_jobs, reward
        self.config = SimulationConfig(placer=placer, drop_unrunnable=True)
        self._rng = make_rng(0)
        self._base_cache: dict[int, float] = {}

    def seed_starts(self, seed: int) -> None:
        """Seeds the episode-start generator."""
        self._rng = make_rng(seed)

    def sample_start(self) -> int:
        """A random episode start."""
        return int(self._rng.integers(0, len(self.jobs) - self.episode_jobs + 1))

    def simulator(self, start: int, policy: PriorityPolicy) -> Simulator:
        """The simulation of the episode starting at ``start`` under ``policy``."""
        window = self.jobs.window(start, self.episode_jobs)
        return Simulator(window, self.cluster, policy, self.config)

    def base_score(self, start: int) -> float:
        """The base policy's mean metric on the episode starting at ``start`` (cached)."""
        if start not in self._base_cache:
            result = self.simulator(start, make_policy(self.base_policy)).run()
            self._base_cache[start] = metric_value(result, self.metric)
        return self._base_cache[start]

    def outcome(self, start: int, result: SimulationResult, decisions: int) -> EpisodeOutcome:
        """The episode's reward and its improvement over the base policy."""
        base = self.base_score(start)
        rl = metric_value(result, self.metric)
        gap = normalised_gap(base, rl, self.metric)
        reward = gap if self.reward == "gap" else signed_metric(rl, self.metric)
        return EpisodeOutcome(start, base, rl, reward, decisions, gap)

    def play(self, make_policy_for_episode: Callable[[], DecidingPolicy]) -> EpisodeOutcome:
        """Plays one episode from a random start under a fresh policy from
        ``make_policy_for_episode``; starts where the policy made no decision are redrawn.

        Raises:
            HetschedError: When no start in ``MAX_REDRAWS`` offered a decision.
        """
        for _attempt in range(MAX_REDRAWS):
            start = self.sample_start()
            policy = make_policy_for_episode()
            result = self.simulator(start, policy).run()
            if policy.decisions:
                return self.outcome(start, result, policy.decisions)
        raise HetschedError(NO_DECISION)
