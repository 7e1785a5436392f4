"""Event-driven simulation of a GPU cluster replaying a job table under a priority policy.

Mechanism only: the policy orders the queue (:mod:`hetsched.jobs.policies`), the placer chooses
nodes (:mod:`hetsched.jobs.placement`), and this module moves jobs from waiting to running to
done on the shared :class:`~hetsched.core.events.EventLoop`. Events are arrivals and completions
(arrivals first at one instant); after all events of one instant, one scheduling pass runs (a
lower-priority event at that time), or, in ``rlscheduler-backfill`` mode, one after every event.

The queue modes (greedy, strict, committed, EASY and RLScheduler backfilling) are described in
:mod:`hetsched.jobs.sim.config`, the backfilling rules in :mod:`hetsched.jobs.sim.backfill`; the
outcome is a :class:`~hetsched.jobs.sim.result.SimulationResult`.

Run times: a job placed on GPU type ``t`` runs ``run_time_s / speed(t)``. Reservations use the
requested time (an estimate) scaled the same way, never the true run time unless the ``oracle``
estimate filled it.

Cost: every step is linear in the jobs it touches, not in the trace: one pending arrival event
at a time, the queue as one NumPy array (arrivals appended once per pass, started jobs masked
out), shapes instead of per-job requests (:mod:`.job_shapes`), running jobs kept in end order
(:mod:`.running_jobs`), and EASY's reservation reused while nothing it depends on changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.events import EventLoop
from hetsched.jobs.cluster.model import Allocation, Cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import LookaheadPlacer, Placer
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import HoldingPolicy, PriorityPolicy, QueueState
from hetsched.jobs.sim.backfill import BackfillContext, easy_backfill, rlscheduler_backfill
from hetsched.jobs.sim.config import (
    COMMITTED_MODES,
    QUEUE_MODES,
    SimulationConfig,
    UnrunnableJobError,
)
from hetsched.jobs.sim.easy_backfill import head_reservation
from hetsched.jobs.sim.job_shapes import JobShapes
from hetsched.jobs.sim.result import SimulationResult, placement_columns
from hetsched.jobs.sim.running_jobs import RunningJobs
from hetsched.jobs.sim.waiting_queue import WaitingQueue
from hetsched.jobs.traces.job_table import JobTable

#: Event priorities at one instant: arrivals, then completions, then the scheduling pass.
ARRIVAL_PRIORITY, COMPLETION_PRIORITY, PASS_PRIORITY = -1, 0, 1


@dataclass
class _Reservation:
    """A head's reservation and what it was computed from (reused while still valid)."""

    head: int
    version: int  # the simulator's start/end count when it was last known valid
    now_s: float
    shadow_s: float
    extra: ClusterState


class Simulator:
    """Replays ``jobs`` on ``cluster`` under ``policy``.

    Args:
        jobs: The job table; every ``requested_time_s`` must be filled (use
            :func:`hetsched.jobs.estimates.fill_requested_times`), so no hidden oracle is used.
        cluster: The cluster (speed factors included).
        policy: The priority policy.
        config: Queue mode, placer and options.
    """

    def __init__(
        self,
        jobs: JobTable,
        cluster: Cluster,
        policy: PriorityPolicy,
        config: SimulationConfig | None = None,
    ) -> None:
        self.config = config or SimulationConfig()
        if self.config.queue_mode not in QUEUE_MODES:
            raise HetschedError(
                f"unknown queue mode {self.config.queue_mode!r}; known: {', '.join(QUEUE_MODES)}"
            )
        missing = np.isnan(jobs.requested_time_s)
        if missing.any():
            raise HetschedError(
                f"{int(missing.sum())} jobs have no requested time (first: {jobs.id[missing][0]});"
                " fill them with an estimate model (or the explicit 'oracle') before simulating"
            )
        self.jobs = jobs
        self.cluster = cluster
        self.policy = policy
        placer = self.config.placer
        self.placer: Placer = PLACERS.create(placer) if isinstance(placer, str) else placer
        self._starts_per_pass = self.config.starts_per_pass or getattr(
            policy, "starts_per_pass", None
        )
        self._holder = policy if isinstance(policy, HoldingPolicy) else None
        # A placer with look-ahead (the MILP placer) is told the next jobs in priority order.
        self._lookahead = self.placer if isinstance(self.placer, LookaheadPlacer) else None
        self.user_codes, _ = jobs.user_codes()
        self._shapes = JobShapes(jobs, cluster)
        self._shape = self._shapes.of_job.tolist()
        self._num_gpus = jobs.num_gpus
        self._requested = np.maximum(jobs.requested_time_s, 1e-9)
        self._run = jobs.run_time_s

    # -- run -------------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        """Simulates until every runnable job has finished.

        Raises:
            UnrunnableJobError: If a job can never fit and ``drop_unrunnable`` is off.
        """
        n = len(self.jobs)
        dropped = self._shapes.unrunnable(self.cluster, self.placer)
        if len(dropped) and not self.config.drop_unrunnable:
            first = int(dropped[0])
            raise UnrunnableJobError(
                f"{len(dropped)} jobs can never fit on cluster {self.cluster.name!r} (first:"
                f" {self.jobs.id[first]} with {self.jobs.num_gpus[first]} GPUs, types"
                f" {sorted(self.jobs.gpu_types[first] or []) or 'any'}, VC"
                f" {self.jobs.virtual_cluster[first]}); use drop_unrunnable to skip them"
            )
        self._loop = EventLoop(start_s=float(self.jobs.submit_time_s[0]) if n else 0.0)
        self._state = ClusterState(self.cluster)
        holds = (self.jobs.cpus > 0) | (self.jobs.memory_mib > 0)
        self._running = RunningJobs(self._num_gpus, holds, self.cluster.total_gpus)
        self._history = UsageHistory(int(self.user_codes.max(initial=-1)) + 1)
        self._start = np.full(n, np.nan)
        self._end = np.full(n, np.nan)
        self._queue = WaitingQueue(
            n,
            self._score,
            bool(getattr(self.policy, "static_scores", False)),
            self.config.recompute_interval_s,
        )
        self._pass_pending = False
        self._committed: int | None = None
        self._shadow: tuple[int, float] = (-1, math.inf)  # (blocked head, its shadow time)
        self._reservation: _Reservation | None = None
        self._version = 0  # counts starts and ends: what a cached reservation depends on
        self._scanned = (-1, -1, -1)  # (head, version, newest arrival) at the last EASY scan
        self._passes = 0
        self._util_t: list[float] = []
        self._util_busy: list[int] = []
        self._reservations: list[tuple[int, float, float]] = []
        self._backfill = BackfillContext(
            self._state,
            self._running,
            self._queue.waiting,
            self.cluster,
            self.placer,
            self._shapes,
            self._num_gpus,
            self._requested,
            self._start_job,
        )
        keep = np.ones(n, dtype=bool)
        keep[dropped] = False
        self._arrivals = np.flatnonzero(keep).tolist()
        self._next_arrival = 0
        if self._arrivals:
            self._schedule_arrival()
        self._loop.run()
        gpu_type, nodes = placement_columns(self._running.allocations(), self.cluster)
        return SimulationResult(
            jobs=self.jobs,
            cluster=self.cluster,
            policy=getattr(self.policy, "name", type(self.policy).__name__),
            queue_mode=self.config.queue_mode,
            start_s=self._start,
            end_s=self._end,
            gpu_type=gpu_type,
            nodes=nodes,
            utilisation_time_s=np.array(self._util_t),
            utilisation_busy_gpus=np.array(self._util_busy),
            reservations=self._reservations,
            dropped=dropped,
            passes=self._passes,
        )

    # -- events ----------------------------------------------------------------------------------
    def _request_pass(self) -> None:
        if not self._pass_pending:
            self._pass_pending = True
            self._loop.schedule(self._loop.now_s(), self._scheduling_pass, PASS_PRIORITY)

    def _after_event(self) -> None:
        # RLScheduler's backfilling steps one event at a time (arrivals before completions at
        # one instant, completions in start order) and scans after each, so that mode runs a
        # pass per event; the others run one pass after all events of an instant.
        if self.config.queue_mode == "rlscheduler-backfill":
            self._scheduling_pass()
        else:
            self._request_pass()

    def _schedule_arrival(self) -> None:
        """Schedules the next job's arrival (one arrival event is pending at a time)."""
        index = self._arrivals[self._next_arrival]
        self._loop.schedule(float(self.jobs.submit_time_s[index]), self._arrive, ARRIVAL_PRIORITY)

    def _arrive(self) -> None:
        index = self._arrivals[self._next_arrival]
        self._next_arrival += 1
        self._queue.arrive(index)
        if self._next_arrival < len(self._arrivals):
            self._schedule_arrival()
        self._after_event()

    def _completion(self, index: int):
        def complete() -> None:
            now = self._loop.now_s()
            if not math.isnan(self._end[index]):
                raise RuntimeError(f"job {self.jobs.id[index]} finished twice")
            self._state.release(self._running.remove(index))
            self._version += 1
            self._end[index] = now
            self._history.record_completion(
                int(self.user_codes[index]),
                int(self._num_gpus[index]),
                now - float(self._start[index]),
                now,
            )
            self._after_event()

        return complete

    def _start_job(self, index: int, alloc: Allocation) -> None:
        now = self._loop.now_s()
        self._state.allocate(alloc)
        speed = self.cluster.speed_of(alloc.gpu_type) if self._num_gpus[index] > 0 else 1.0
        self._start[index] = now
        self._queue.start(index)
        self._version += 1
        if index == self._committed:
            self._committed = None
        self._running.add(index, alloc, now + self._requested[index] / speed)
        self._loop.schedule(now + self._run[index] / speed, self._completion(index))

    # -- the scheduling pass ---------------------------------------------------------------------
    def _score(self, queue: np.ndarray, now: float) -> np.ndarray:
        """The policy's scores of ``queue`` at ``now``."""
        return self.policy.score(self._queue_state(queue, now))

    def _queue_state(self, queue: np.ndarray, now: float) -> QueueState:
        return QueueState(
            self.jobs, queue, now, self.cluster, self._state, self._history, self.user_codes
        )

    def _scheduling_pass(self) -> None:
        # One pass: order the queue by policy score (ties: submission order), then start jobs in
        # that order while they fit. What happens at the first job that does not fit depends on
        # the queue mode: greedy skips it, strict stops, easy reserves it and backfills.
        self._pass_pending = False
        self._passes += 1
        if self.config.max_passes is not None and self._passes > self.config.max_passes:
            raise HetschedError(f"simulation exceeded {self.config.max_passes} scheduling passes")
        now = self._loop.now_s()
        if len(self._queue):
            order = self._queue.ordered(now)
            committed = self._committed
            if committed is not None:
                order = np.concatenate(([committed], order[order != committed]))
            if self._holder is not None and self._holder.holding():
                order = order[:0]  # the policy keeps every job waiting until the next event
            if self._start_in_order(order, now):
                self._queue.compact_if_stale()
        self._util_t.append(now)
        self._util_busy.append(self._running.busy_gpus)

    def _start_in_order(self, order: np.ndarray, now: float) -> list[int]:
        mode = self.config.queue_mode
        state = self._state
        free_gpus = self._running.free_gpus
        gpus = self._num_gpus
        started: list[int] = []
        failed: set[int] = set()
        waiting = self._queue.waiting
        # Greedy may skip to the end of the queue: it stops once nothing left can fit.
        smallest_after = _smallest_from(gpus[order]) if mode == "greedy" else None
        for position in range(len(order)):  # most passes stop early: no list of the whole queue
            if smallest_after is not None and free_gpus < smallest_after[position]:
                break
            index = int(order[position])
            if not waiting[index]:
                continue  # a stale entry: started earlier
            need = int(gpus[index])
            alloc = None
            shape = self._shape[index]
            if need <= free_gpus and shape not in failed:
                if self._lookahead is not None and self._lookahead.lookahead_jobs:
                    upcoming = order[position + 1 : position + 1 + self._lookahead.lookahead_jobs]
                    self._lookahead.set_lookahead([self._shapes.request(j) for j in upcoming])
                alloc = self.placer.place(self._shapes.requests[shape], state)
                if alloc is None:
                    failed.add(shape)
            if alloc is not None:
                self._start_job(index, alloc)
                started.append(index)
                free_gpus -= need
                if self._starts_per_pass is not None and len(started) >= self._starts_per_pass:
                    self._request_pass()  # re-score with the new free resources, same instant
                    break
                continue
            if mode in COMMITTED_MODES:
                # RLScheduler re-picks after every start, so the job that is picked and does not
                # fit is the one that stays picked (a later, better-ranked arrival waits).
                self._committed = index
            if mode in ("strict", "committed"):
                break
            if mode == "easy":
                started += self._easy_backfill(index, order[position + 1 :], now, failed)
                break
            if mode == "rlscheduler-backfill":
                started += self._rlscheduler_backfill(index, now, failed)
                break
        return started

    def _easy_backfill(self, head: int, rest: np.ndarray, now: float, failed: set[int]):
        """EASY: the head's reservation (reused from an earlier pass when no start or end since
        could have moved it), then :func:`~hetsched.jobs.sim.backfill.easy_backfill`."""
        cached = self._reservation
        reusable = (
            cached is not None
            and cached.head == head
            and cached.version == self._version
            and (cached.now_s == now or self._running.earliest_end_s() >= now)
        )
        if not reusable:
            shadow_s, extra = head_reservation(
                self._state, self._shapes.request(head), self._running, now, self.placer
            )
            cached = self._reservation = _Reservation(head, self._version, now, shadow_s, extra)
        elif self._scanned[:2] == (head, self._version):
            # Nothing started or ended since the last scan for this head, and a candidate's end
            # only moves later with time: the jobs it turned down would be turned down again,
            # so only the jobs that arrived since can backfill.
            fresh = self._queue.arrived_after(self._scanned[2])
            rest = self._queue.in_priority_order(fresh[fresh != head])
        assert cached is not None
        self._reservations.append((head, now, cached.shadow_s))
        started, extra_changed = easy_backfill(
            self._backfill, rest, now, cached.shadow_s, cached.extra, failed
        )
        # Jobs that end by the shadow time leave the reservation as it was; one that runs past
        # it took resources from ``extra``, where the head's placement could change.
        cached.version = -1 if extra_changed else self._version
        self._scanned = (head, self._version, self._queue.newest())
        return started

    def _rlscheduler_backfill(self, head: int, now: float, failed: set[int]) -> list[int]:
        """RLScheduler: the shadow time computed once, when the head first blocks, then
        :func:`~hetsched.jobs.sim.backfill.rlscheduler_backfill` over the waiting jobs in
        submission order."""
        if self._shadow[0] != head:
            shadow_s, _ = head_reservation(
                self._state, self._shapes.request(head), self._running, now, self.placer
            )
            self._shadow = (head, shadow_s)
            self._reservations.append((head, now, shadow_s))
        waiting = self._queue.in_arrival_order()
        waiting = waiting[waiting != head]
        return rlscheduler_backfill(self._backfill, waiting, now, self._shadow[1], failed)


def _smallest_from(values: np.ndarray) -> np.ndarray:
    """``out[i] = min(values[i:])``: the smallest GPU count from each queue position on."""
    return np.minimum.accumulate(values[::-1])[::-1]
