"""A Gymnasium environment for the prioritisation decision (RLTune's Fig. 8 pipeline, and
RLScheduler's kernel on its own observation).

An episode (:mod:`.episodes`) replays ``episode_jobs`` consecutive jobs from a random start of the
training trace on an empty cluster. Whenever two or more visible jobs could start now, the agent
picks the one to start next; everything else (arrivals, completions, placement, jobs that are alone
in fitting) is the simulator's. The reward comes once, at the end (:mod:`.episodes`).

The simulator is event-driven and calls its policy back; to give Gymnasium's ``step`` the control,
the episode's simulation runs in a worker thread that hands each decision to ``step`` and waits for
the action. Exactly one side runs at a time, so episodes are as deterministic as the simulator.
Training uses :meth:`EpisodeSampler.play <hetsched.jobs.rl.episodes.EpisodeSampler.play>` with a
:class:`DecisionPolicy` instead, the same decisions called back in one thread: a thread hand-off
per decision costs milliseconds on a loaded machine.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.episodes import (
    MAX_REDRAWS,
    NO_DECISION,
    Chooser,
    EpisodeOutcome,
    EpisodeSampler,
)
from hetsched.jobs.rl.feature_sets import get_feature_set
from hetsched.jobs.rl.features import choice_possible
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import JobTable


class DecisionPolicy:
    """The policy of the agent's pipeline: when two or more visible jobs could start now, asks
    ``choose(observation, mask)`` for the slot of the one to start next; otherwise whatever fits
    starts.

    ``starts_per_pass = 1`` makes the simulator come back after every start, so each decision
    sees the free resources left by the previous one.

    Args:
        choose: Maps the window's flat observation and its mask (the slots whose job can start
            now) to a slot; a slot whose job cannot start now is replaced by the oldest job that
            can.
        max_queue: Visible queue slots.
        feature_set: The observation the agent reads (``rltune`` or ``rlscheduler``).
    """

    starts_per_pass = 1
    name = "rl"

    def __init__(self, choose: Chooser, max_queue: int, feature_set: str = "rltune") -> None:
        self.choose = choose
        self.max_queue = max_queue
        self.build = get_feature_set(feature_set).build
        self.decisions = 0

    def score(self, state: QueueState) -> np.ndarray:
        """The chosen job first, the others in submission order."""
        scores = np.arange(len(state.queue), dtype=np.float64)
        if not choice_possible(state, self.max_queue):
            return scores  # at most one job can start: nothing to choose
        features = self.build(state, self.max_queue)
        visible = len(features.queue)
        scores[:visible] += np.where(features.can_start[:visible], 0.0, len(scores))
        if int(features.can_start.sum()) < 2:
            return scores  # the one job that can start goes first; no choice
        slot = int(self.choose(features.flat(), features.can_start.copy()))
        self.decisions += 1
        if not 0 <= slot < self.max_queue or not features.can_start[slot]:
            slot = int(np.flatnonzero(features.can_start)[0])
        scores[slot] = -1.0
        return scores


class _AbandonedError(Exception):
    """Raised inside the worker thread when the environment drops an unfinished episode."""


class _Episode:
    """One simulation running in a worker thread, paused at each decision (Gymnasium's side)."""

    def __init__(self, simulator_for: Callable[[Chooser], Simulator]):
        self.to_env: queue.Queue = queue.Queue(maxsize=1)
        self.to_sim: queue.Queue = queue.Queue(maxsize=1)
        simulator = simulator_for(self._handoff)
        self.thread = threading.Thread(target=self._run, args=(simulator,), daemon=True)
        self.thread.start()

    def _handoff(self, observation: np.ndarray, mask: np.ndarray) -> int:
        self.to_env.put(("decide", (observation, mask)))
        slot = self.to_sim.get()
        if slot is None:
            raise _AbandonedError
        return int(slot)

    def _run(self, simulator: Simulator) -> None:
        try:
            self.to_env.put(("done", simulator.run()))
        except _AbandonedError:
            pass
        except BaseException as error:  # surfaces in the caller's thread, not lost here
            self.to_env.put(("error", error))

    def next(self) -> tuple[str, Any]:
        """Waits for the next ``("decide", (obs, mask))`` or the final ``("done", result)``."""
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


class PrioritisationEnv(gym.Env):
    """Pick the next job to start from a masked, zero-padded queue.

    Action Space:
        ``Discrete(max_queue)``: the queue slot (oldest job = slot 0) of the job to start next.
        ``info["action_mask"]`` marks the slots whose job could start now; an unmasked slot is
        replaced by the oldest job that can start.

    Observation Space:
        ``Box(0, 1, (max_queue * (F + C),))``: the observation vector (``max_queue x F``
        per-job features: RLTune's 8 sampled ones, :mod:`hetsched.jobs.rl.features`, or
        RLScheduler's 4) then the critic vector (``max_queue x C``); padded slots are zero.

    Rewards:
        0 for every decision but the last; then the episode's reward (:mod:`.episodes`): by default
        ``(base − rl) / max(base, rl, 1)`` of the chosen metric between the base policy and the
        agent on the episode's jobs.

    Episode End:
        Terminated when every job of the episode has finished; the final observation is all zeros.

    Arguments:
        jobs: Training jobs (requested times filled), in submission order.
        cluster: The cluster.
        base_policy: Registered policy the reward compares with (``fcfs``, ``sjf``, ...).
        metric: ``wait``, ``jct``, ``bsld`` or ``util``.
        episode_jobs: Jobs per episode (256 in the paper).
        max_queue: Visible queue slots (default: the feature set's window).
        placer: Placer of both pipelines (``pack``, ``spread``, ``milp``).
        feature_set: ``rltune`` or ``rlscheduler``.
        reward: ``gap`` or ``metric`` (:mod:`.episodes`).
    """

    def __init__(
        self,
        jobs: JobTable,
        cluster: Cluster,
        base_policy: str = "fcfs",
        metric: str = "wait",
        episode_jobs: int = 256,
        max_queue: int | None = None,
        placer: str = "pack",
        feature_set: str = "rltune",
        reward: str = "gap",
    ) -> None:
        super().__init__()
        self.metadata = {"render_modes": []}
        features = get_feature_set(feature_set)
        self.episodes = EpisodeSampler(
            jobs, cluster, base_policy, metric, episode_jobs, placer, reward
        )
        self.feature_set = feature_set
        self.max_queue = features.max_queue if max_queue is None else max_queue
        self._features_per_slot = features.job_features + features.critic_features
        width = self.max_queue * self._features_per_slot
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(width,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(self.max_queue)
        self._episode: _Episode | None = None
        self._start = 0
        self._decisions = 0
        self.last_outcome: EpisodeOutcome | None = None

    def decision_policy(self, choose: Chooser) -> DecisionPolicy:
        """The agent pipeline's policy, asking ``choose`` at each decision."""
        return DecisionPolicy(choose, self.max_queue, self.feature_set)

    def _simulator(self, start: int, choose: Chooser) -> Simulator:
        return self.episodes.simulator(start, self.decision_policy(choose))

    def play(self, choose: Chooser) -> EpisodeOutcome:
        """Plays one episode from a random start in this thread, ``choose`` deciding (the fast
        path of training: no thread hand-off per decision)."""
        return self.episodes.play(lambda: self.decision_policy(choose))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts an episode at ``options["start"]`` or a random start with a decision in it."""
        super().reset(seed=seed)
        if seed is not None:
            self.episodes.seed_starts(seed)
        self.close()
        fixed_start = None if options is None else options.get("start")
        for _attempt in range(1 if fixed_start is not None else MAX_REDRAWS):
            start = int(fixed_start) if fixed_start is not None else self.episodes.sample_start()
            self._episode = _Episode(partial(self._simulator, start))
            kind, payload = self._episode.next()
            if kind == "decide":
                self._start, self._decisions = start, 0
                observation, mask = payload
                return observation, {"action_mask": mask}
            self._episode = None
        raise HetschedError(NO_DECISION)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Starts the chosen job and runs the simulation to the next decision or the end."""
        if self._episode is None:
            raise HetschedError("step() called before reset() or after the episode ended")
        self._decisions += 1
        kind, payload = self._episode.act(int(action))
        if kind == "decide":
            observation, mask = payload
            return observation, 0.0, False, False, {"action_mask": mask}
        self._episode = None
        self.last_outcome = self.episodes.outcome(self._start, payload, self._decisions)
        mask = np.zeros(self.max_queue, dtype=bool)
        mask[0] = True  # keeps the terminal mask usable by a sampler; never acted upon
        info = {"action_mask": mask, "episode": self.last_outcome}
        obs = np.zeros(self.max_queue * self._features_per_slot, np.float32)
        return obs, self.last_outcome.reward, True, False, info

    def close(self) -> None:
        """Stops an unfinished episode's worker thread."""
        if self._episode is not None:
            self._episode.abandon()
            self._episode = None
