"""SchedInspector's mechanism (Zhang, Dai and Xie, HPDC'22) on the GPU simulator.

A base heuristic (SJF, F1, FCFS, ...) keeps ordering the queue; each time its pick could start,
the inspector sees the pick and the system (:mod:`.inspector_features`) and accepts (the pick
starts) or rejects it. A rejection starts nothing: the queue waits for the next arrival or
completion (the simulator's :class:`~hetsched.jobs.policies.queue_state.HoldingPolicy` hook) and
the base policy picks again, perhaps a different job. So the inspector can only delay, never
reorder; what it learns is when waiting beats starting the base policy's choice now.

What keeps it from starving anyone: after ``max_rejections`` consecutive rejections the next pick
is accepted without asking, and nothing is rejected while no job is running (the only event left
might be an arrival that never comes). ``starts_per_pass = 1`` makes every start its own decision.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hetsched.jobs.policies.queue_state import PriorityPolicy, QueueState
from hetsched.jobs.rl.episodes import Chooser
from hetsched.jobs.rl.features import build_features
from hetsched.jobs.rl.inspector_features import (
    INSPECTOR_QUEUE,
    MAX_REJECTIONS,
    inspector_observation,
)
from hetsched.jobs.traces.job_table import JobTable

ACCEPT, REJECT = 0, 1
"""The inspector's two actions."""
BOTH_ACTIONS = np.array([True, True])
"""The action mask of an inspection: it is asked only when rejecting is allowed."""


def jobs_running(state: QueueState) -> bool:
    """Whether any job holds resources now, i.e. a completion event is still to come."""
    free, cluster = state.cluster_state, state.cluster
    return bool(
        np.any(free.free_gpus < cluster.node_gpus)
        or np.any(free.free_cpus < cluster.node_cpus)
        or np.any(free.free_memory_mib < cluster.node_memory_mib)
    )


class InspectorPolicy:
    """The base policy's order, with an inspector that may hold the pass.

    Args:
        base: The base heuristic.
        decide: ``(observation, mask) -> ACCEPT | REJECT`` (the agent, sampled or greedy).
        max_queue: Jobs of the base order whose features are built (the pick is the first of them
            that can start now).
        max_rejections: Consecutive rejections after which the pick is accepted unasked.
        name: Label in tables (default ``SchedInspector-<base>``).
    """

    starts_per_pass = 1

    def __init__(
        self,
        base: PriorityPolicy,
        decide: Chooser,
        max_queue: int = INSPECTOR_QUEUE,
        max_rejections: int = MAX_REJECTIONS,
        name: str | None = None,
    ) -> None:
        self.base, self.decide = base, decide
        self.max_queue, self.max_rejections = max_queue, max_rejections
        self.name = name or f"SchedInspector-{base.name}"
        self.decisions = 0
        self.rejections = 0
        self.consecutive = 0
        self._holding = False
        self._jobs: JobTable | None = None

    def holding(self) -> bool:
        """True when the inspector rejected the pick of the pass just scored."""
        return self._holding

    def score(self, state: QueueState) -> np.ndarray:
        """The base policy's scores; asks the inspector about the base policy's pick when it
        could start and may be rejected, and holds the pass on a rejection."""
        if state.jobs is not self._jobs:  # a new simulation: no rejections carried over
            self._jobs, self.consecutive = state.jobs, 0
        self._holding = False
        scores = np.asarray(self.base.score(state), dtype=np.float64)
        if self.consecutive >= self.max_rejections or not jobs_running(state):
            self.consecutive = 0  # the pick is accepted unasked
            return scores
        order = np.argsort(scores, kind="stable")
        features = build_features(replace(state, queue=state.queue[order]), self.max_queue)
        startable = np.flatnonzero(features.can_start)
        if not len(startable):
            return scores  # nothing the base policy shows can start: nothing to inspect
        observation = inspector_observation(
            state, features, int(startable[0]), self.consecutive, self.max_rejections
        )
        self.decisions += 1
        if int(self.decide(observation, BOTH_ACTIONS.copy())) == REJECT:
            self.rejections += 1
            self.consecutive += 1
            self._holding = True
        else:
            self.consecutive = 0
        return scores
