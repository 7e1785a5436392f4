"""A Gymnasium environment for RLTune's prioritisation decision (Fig. 8's RL pipeline).

An episode replays ``episode_jobs`` consecutive jobs from a random start of the training trace on
an empty cluster. Whenever two or more visible jobs could start now, the agent picks the one to
start next; everything else (arrivals, completions, placement, jobs that are alone in fitting) is
the simulator's. The reward comes once, at the end: the normalised gap between the base policy's
and the agent's mean metric on the same jobs, ``(base − rl) / max(base, rl, 1)`` (section 3.2;
sign flipped for utilisation, where higher is better).

The simulator is event-driven and calls its policy back; to give Gymnasium's ``step`` the control,
the episode's simulation runs in a worker thread that hands each decision to ``step`` and waits for
the action. Exactly one side runs at a time, so episodes are as deterministic as the simulator.
Training uses :meth:`PrioritisationEnv.play` instead, the same decisions called back in one thread:
a thread hand-off per decision costs milliseconds on a loaded machine.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.features import (
    CRITIC_FEATURES,
    MAX_QUEUE_SIZE,
    OBS_FEATURES,
    QueueFeatures,
    build_features,
    choice_possible,
)
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import JobTable

MAX_REDRAWS = 20
"""Random starts tried before giving up on finding an episode with a decision in it."""
NO_DECISION = (
    "no episode offered a choice between two startable jobs; the cluster is too large for this"
    " trace (try a smaller --cluster-fraction or a higher --arrival-compression)"
)
#: Metric name -> (summary key, True when lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "wait": ("wait_s", True),
    "jct": ("jct_s", True),
    "bsld": ("bsld", True),
    "util": ("utilisation_pct", False),
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


class DecisionPolicy:
    """The policy of the agent's pipeline: when two or more visible jobs could start now, asks
    ``choose(features)`` for the slot of the one to start next; otherwise whatever fits starts.

    ``starts_per_pass = 1`` makes the simulator come back after every start, so each decision
    sees the free resources left by the previous one.

    Args:
        choose: Maps the queue's features to a slot; a slot whose job cannot start now is replaced
            by the oldest job that can.
        max_queue: Visible queue slots.
    """

    starts_per_pass = 1
    name = "rl"

    def __init__(self, choose: Callable[[QueueFeatures], int], max_queue: int) -> None:
        self.choose = choose
        self.max_queue = max_queue
        self.decisions = 0

    def score(self, state: QueueState) -> np.ndarray:
        """The chosen job first, the others in submission order."""
        scores = np.arange(len(state.queue), dtype=np.float64)
        if not choice_possible(state, self.max_queue):
            return scores  # at most one job can start: nothing to choose
        features = build_features(state, self.max_queue)
        visible = len(features.queue)
        scores[:visible] += np.where(features.can_start[:visible], 0.0, len(scores))
        if int(features.can_start.sum()) < 2:
            return scores  # the one job that can start goes first; no choice
        slot = int(self.choose(features))
        self.decisions += 1
        if not 0 <= slot < self.max_queue or not features.can_start[slot]:
            slot = int(np.flatnonzero(features.can_start)[0])
        scores[slot] = -1.0
        return scores


class _AbandonedError(Exception):
    """Raised inside the worker thread when the environment drops an unfinished episode."""


class _Episode:
    """One simulation running in a worker thread, paused at each decision (Gymnasium's side)."""

    def __init__(self, simulator_for: Callable[[DecisionPolicy], Simulator], max_queue: int):
        self.to_env: queue.Queue = queue.Queue(maxsize=1)
        self.to_sim: queue.Queue = queue.Queue(maxsize=1)
        simulator = simulator_for(DecisionPolicy(self._handoff, max_queue))
        self.thread = threading.Thread(target=self._run, args=(simulator,), daemon=True)
        self.thread.start()

    def _handoff(self, features: QueueFeatures) -> int:
        self.to_env.put(("decide", features))
        slot = self.to_sim.get()
        if slot is None:
            raise _AbandonedError
        return slot

    def _run(self, simulator: Simulator) -> None:
        try:
            self.to_env.put(("done", simulator.run()))
        except _AbandonedError:
            pass
        except BaseException as error:  # surfaces in the caller's thread, not lost here
            self.to_env.put(("error", error))

    def next(self) -> tuple[str, Any]:
        """Waits for the next ``("decide", features)`` or the final ``("done", result)``."""
        kind, payload = self.to_env.get()
        if kind == "error":
            raise payload
        return kind, payload

    def act(self, slot: int) -> tuple[str, Any]:
        """Answers the pending decision with ``slot`` and waits for the next one."""
        self.to_sim.put(slot)
        return self.next()

    def abandon(self) -> None:
        """Stops the worker of an unfinished episode."""
        if self.thread.is_alive():
            self.to_sim.put(None)
            self.thread.join()


@dataclass
class EpisodeOutcome:
    """Base and agent metric of a finished episode."""

    start: int
    base: float
    rl: float
    reward: float
    decisions: int


class PrioritisationEnv(gym.Env):
    """Pick the next job to start from a masked, zero-padded queue.

    Action Space:
        ``Discrete(max_queue)``: the queue slot (oldest job = slot 0) of the job to start next.
        ``info["action_mask"]`` marks the slots whose job could start now; an unmasked slot is
        replaced by the oldest job that can start.

    Observation Space:
        ``Box(0, 1, (max_queue * 13,))``: the observation vector (``max_queue x 8`` sampled
        features, :mod:`hetsched.jobs.features`) then the critic vector (``max_queue x 5``);
        padded slots are zero.

    Rewards:
        0 for every decision but the last; then ``(base − rl) / max(base, rl, 1)`` of the chosen
        metric between the base policy and the agent on the episode's jobs.

    Episode End:
        Terminated when every job of the episode has finished; the final observation is all zeros.

    Arguments:
        jobs: Training jobs (requested times filled), in submission order.
        cluster: The cluster.
        base_policy: Registered policy the reward compares with (``fcfs``, ``sjf``, ...).
        metric: ``wait``, ``jct``, ``bsld`` or ``util``.
        episode_jobs: Jobs per episode (256 in the paper).
        max_queue: Visible queue slots (MAX_QUEUE_SIZE).
        placer: Placer of both pipelines (``pack``, ``spread``, ``milp``).
    """

    def __init__(
        self,
        jobs: JobTable,
        cluster: Cluster,
        base_policy: str = "fcfs",
        metric: str = "wait",
        episode_jobs: int = 256,
        max_queue: int = MAX_QUEUE_SIZE,
        placer: str = "pack",
    ) -> None:
        super().__init__()
        self.metadata = {"render_modes": []}
        self.metric = check_metric(metric)
        make_policy(base_policy)  # an unknown name fails here, listing the known ones
        if episode_jobs < 2 or episode_jobs > len(jobs):
            raise HetschedError(
                f"episodes of {episode_jobs} jobs need a trace of at least that many (>= 2);"
                f" the training part has {len(jobs)}"
            )
        self.jobs, self.cluster = jobs, cluster
        self.base_policy, self.episode_jobs, self.max_queue = base_policy, episode_jobs, max_queue
        self.config = SimulationConfig(placer=placer, drop_unrunnable=True)
        width = max_queue * (OBS_FEATURES + CRITIC_FEATURES)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(width,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(max_queue)
        self._base_cache: dict[int, float] = {}
        self._episode: _Episode | None = None
        self._start = 0
        self._decisions = 0
        self.last_outcome: EpisodeOutcome | None = None

    def _window(self, start: int) -> JobTable:
        return self.jobs.window(start, self.episode_jobs)

    def simulator(self, start: int, policy: DecisionPolicy) -> Simulator:
        """The agent pipeline's simulation of the episode starting at ``start``."""
        return Simulator(self._window(start), self.cluster, policy, self.config)

    def seed_starts(self, seed: int) -> None:
        """Seeds the episode-start generator without starting an episode."""
        super().reset(seed=seed)

    def sample_start(self) -> int:
        """A random episode start (from the generator seeded by ``reset(seed=...)``)."""
        return int(self.np_random.integers(0, len(self.jobs) - self.episode_jobs + 1))

    def base_score(self, start: int) -> float:
        """The base policy's mean metric on the episode starting at ``start`` (cached)."""
        if start not in self._base_cache:
            result = Simulator(
                self._window(start), self.cluster, make_policy(self.base_policy), self.config
            ).run()
            self._base_cache[start] = metric_value(result, self.metric)
        return self._base_cache[start]

    def outcome(self, start: int, result: SimulationResult, decisions: int) -> EpisodeOutcome:
        """The episode's reward: the normalised gap between base and agent (section 3.2)."""
        base = self.base_score(start)
        rl = metric_value(result, self.metric)
        return EpisodeOutcome(start, base, rl, normalised_gap(base, rl, self.metric), decisions)

    def play(self, choose: Callable[[QueueFeatures], int]) -> EpisodeOutcome:
        """Plays one episode from a random start in this thread, ``choose`` deciding (the fast
        path of training: no thread hand-off per decision). Starts without a decision are
        redrawn."""
        for _attempt in range(MAX_REDRAWS):
            start = self.sample_start()
            policy = DecisionPolicy(choose, self.max_queue)
            result = self.simulator(start, policy).run()
            if policy.decisions:
                return self.outcome(start, result, policy.decisions)
        raise HetschedError(NO_DECISION)

    def _observation(self, features: QueueFeatures) -> tuple[np.ndarray, dict[str, Any]]:
        return features.flat(), {"action_mask": features.can_start.copy()}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts an episode at ``options["start"]`` or a random start with a decision in it."""
        super().reset(seed=seed)
        self.close()
        fixed_start = None if options is None else options.get("start")
        for _attempt in range(1 if fixed_start is not None else MAX_REDRAWS):
            start = int(fixed_start) if fixed_start is not None else self.sample_start()
            self._episode = _Episode(partial(self.simulator, start), self.max_queue)
            kind, payload = self._episode.next()
            if kind == "decide":
                self._start, self._decisions = start, 0
                return self._observation(payload)
            self._episode = None
        raise HetschedError(NO_DECISION)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Starts the chosen job and runs the simulation to the next decision or the end."""
        if self._episode is None:
            raise HetschedError("step() called before reset() or after the episode ended")
        self._decisions += 1
        kind, payload = self._episode.act(int(action))
        if kind == "decide":
            obs, info = self._observation(payload)
            return obs, 0.0, False, False, info
        self._episode = None
        self.last_outcome = self.outcome(self._start, payload, self._decisions)
        mask = np.zeros(self.max_queue, dtype=bool)
        mask[0] = True  # keeps the terminal mask usable by a sampler; never acted upon
        info = {"action_mask": mask, "episode": self.last_outcome}
        obs = np.zeros(self.max_queue * (OBS_FEATURES + CRITIC_FEATURES), np.float32)
        return obs, self.last_outcome.reward, True, False, info

    def close(self) -> None:
        """Stops an unfinished episode's worker thread."""
        if self._episode is not None:
            self._episode.abandon()
            self._episode = None
