"""Event-driven simulation of a GPU cluster replaying a job table under a priority policy.

Mechanism only: the policy orders the queue (:mod:`hetsched.jobs.policies`), the placer chooses
nodes (:mod:`hetsched.jobs.placement`), and this module moves jobs from waiting to running to
done on the shared :class:`~hetsched.core.events.EventLoop`. Events are arrivals and completions;
after all events of one instant, one scheduling pass runs (a lower-priority event at that time).

The queue modes (greedy, strict, committed, EASY and RLScheduler backfilling) are described in
:mod:`hetsched.jobs.sim.config`; the outcome is a
:class:`~hetsched.jobs.sim.result.SimulationResult`.

Run times: a job placed on GPU type ``t`` runs ``run_time_s / speed(t)``. Reservations use the
requested time (an estimate) scaled the same way, never the true run time unless the ``oracle``
estimate filled it.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.events import EventLoop
from hetsched.jobs.cluster.model import Allocation, Cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, LookaheadPlacer, Placer
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import HoldingPolicy, PriorityPolicy, QueueState
from hetsched.jobs.sim.config import (
    COMMITTED_MODES,
    QUEUE_MODES,
    SimulationConfig,
    UnrunnableJobError,
)
from hetsched.jobs.sim.easy_backfill import head_reservation
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.traces.job_table import JobTable


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
        self._requests = self._build_requests()
        # Jobs of one shape (eligible nodes, GPUs, CPUs, memory) fit or fail together; within a
        # pass free resources only shrink, so one failed placement rules out the whole shape.
        shapes: dict[tuple, int] = {}
        self._shape = [
            shapes.setdefault((id(r.eligible), r.num_gpus, r.cpus, r.memory_mib), len(shapes))
            for r in self._requests
        ]
        self._num_gpus = jobs.num_gpus
        self._requested = np.maximum(jobs.requested_time_s, 1e-9)
        self._run = jobs.run_time_s

    # -- set-up ----------------------------------------------------------------------------------
    def _build_requests(self) -> list[JobRequest]:
        masks: dict[tuple, np.ndarray] = {}
        requests = []
        jobs = self.jobs
        for i in range(len(jobs)):
            types, vc = jobs.gpu_types[i], jobs.virtual_cluster[i]
            key = (types, vc)
            if key not in masks:
                masks[key] = self.cluster.type_mask(types) & self.cluster.vc_mask(vc)
            requests.append(
                JobRequest(
                    int(jobs.num_gpus[i]),
                    float(jobs.cpus[i]),
                    float(jobs.memory_mib[i]),
                    masks[key],
                )
            )
        return requests

    def _unrunnable(self) -> np.ndarray:
        empty = ClusterState(self.cluster)
        verdict: dict[int, bool] = {}
        bad = []
        for i, req in enumerate(self._requests):
            key = self._shape[i]
            if key not in verdict:
                verdict[key] = self.placer.place(req, empty) is None
            if verdict[key]:
                bad.append(i)
        return np.array(bad, dtype=np.int64)

    # -- run -------------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        """Simulates until every runnable job has finished.

        Raises:
            UnrunnableJobError: If a job can never fit and ``drop_unrunnable`` is off.
        """
        n = len(self.jobs)
        dropped = self._unrunnable()
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
        self._history = UsageHistory(int(self.user_codes.max(initial=-1)) + 1)
        self._start = np.full(n, np.nan)
        self._end = np.full(n, np.nan)
        self._est_end = np.full(n, np.nan)
        self._alloc: list[Allocation | None] = [None] * n
        self._queue = np.zeros(0, dtype=np.int64)
        self._running: set[int] = set()
        self._scores = np.full(n, np.nan)
        self._next_refresh_s = -math.inf
        self._pass_pending = False
        self._committed: int | None = None
        self._shadow: tuple[int, float] = (-1, math.inf)  # (blocked head, its shadow time)
        self._passes = 0
        self._util_t: list[float] = []
        self._util_busy: list[int] = []
        self._reservations: list[tuple[int, float, float]] = []
        skip = np.zeros(n, dtype=bool)
        skip[dropped] = True
        for i in range(n):
            if not skip[i]:
                self._loop.schedule(float(self.jobs.submit_time_s[i]), self._arrival(i))
        self._loop.run()
        gpu_type = np.empty(n, dtype=object)
        nodes = np.empty(n, dtype=object)
        for i, alloc in enumerate(self._alloc):
            gpu_type[i] = "" if alloc is None else alloc.gpu_type
            nodes[i] = (
                ""
                if alloc is None
                else ";".join(
                    f"{self.cluster.nodes[k].name}:{g}"
                    for k, g in zip(alloc.node_indices, alloc.gpus, strict=True)
                )
            )
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
            self._loop.schedule(self._loop.now_s(), self._scheduling_pass, priority=1)

    def _after_event(self) -> None:
        # RLScheduler's backfilling steps one event at a time (arrivals before completions at
        # one instant, completions in start order) and scans after each, so that mode runs a
        # pass per event; the others run one pass after all events of an instant.
        if self.config.queue_mode == "rlscheduler-backfill":
            self._scheduling_pass()
        else:
            self._request_pass()

    def _arrival(self, index: int):
        def arrive() -> None:
            self._queue = np.append(self._queue, index)
            self._after_event()

        return arrive

    def _completion(self, index: int):
        def complete() -> None:
            now = self._loop.now_s()
            if not math.isnan(self._end[index]):
                raise RuntimeError(f"job {self.jobs.id[index]} finished twice")
            self._state.release(self._allocation(index))
            self._running.discard(index)
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
        self._alloc[index] = alloc
        self._start[index] = now
        if index == self._committed:
            self._committed = None
        self._est_end[index] = now + self._requested[index] / speed
        self._running.add(index)
        self._loop.schedule(now + self._run[index] / speed, self._completion(index))

    # -- the scheduling pass ---------------------------------------------------------------------
    def _queue_scores(self, now: float) -> np.ndarray:
        queue = self._queue
        interval = self.config.recompute_interval_s
        if interval is None or now >= self._next_refresh_s:
            self._scores[queue] = self.policy.score(self._queue_state(queue, now))
            if interval is not None:
                self._next_refresh_s = now + interval
        else:
            fresh = queue[np.isnan(self._scores[queue])]
            if len(fresh):
                self._scores[fresh] = self.policy.score(self._queue_state(fresh, now))
        return self._scores[queue]

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
            scores = self._queue_scores(now)
            order = self._queue[np.argsort(scores, kind="stable")]
            committed = self._committed
            if committed is not None:
                order = np.concatenate(([committed], order[order != committed]))
            if self._holder is not None and self._holder.holding():
                order = order[:0]  # the policy keeps every job waiting until the next event
            started = self._start_in_order(order, now)
            if started:
                self._queue = self._queue[~np.isin(self._queue, started)]
        self._util_t.append(now)
        self._util_busy.append(self._state.busy_gpus)

    def _start_in_order(self, order: np.ndarray, now: float) -> list[int]:
        mode = self.config.queue_mode
        state = self._state
        free_gpus = int(state.free_gpus.sum())
        gpus = self._num_gpus
        started: list[int] = []
        failed: set[int] = set()
        has_cpu_only = bool((gpus[order] == 0).any())
        for position, index in enumerate(order.tolist()):
            need = int(gpus[index])
            alloc = None
            shape = self._shape[index]
            if need <= free_gpus and shape not in failed:
                if self._lookahead is not None and self._lookahead.lookahead_jobs:
                    upcoming = order[position + 1 : position + 1 + self._lookahead.lookahead_jobs]
                    self._lookahead.set_lookahead([self._requests[j] for j in upcoming.tolist()])
                alloc = self.placer.place(self._requests[index], state)
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
                started += self._backfill(index, order[position + 1 :], now, failed)
                break
            if mode == "rlscheduler-backfill":
                started += self._backfill_rlscheduler(index, now, failed)
                break
            if free_gpus == 0 and not has_cpu_only:
                break
        return started

    def _reservation(self, head: int, now: float) -> tuple[float, ClusterState]:
        """EASY's reservation for the head job, with running jobs ending at their estimated ends
        (never before now), earliest first (ties: lower index first)."""
        running = np.fromiter(self._running, dtype=np.int64, count=len(self._running))
        ends = np.maximum(self._est_end[running], now)
        order = np.lexsort((running, ends))
        allocations = [self._allocation(j) for j in running[order].tolist()]
        return head_reservation(
            self._state, self._requests[head], allocations, ends[order], self.placer
        )

    def _allocation(self, index: int) -> Allocation:
        """Where running job ``index`` runs."""
        allocation = self._alloc[index]
        if allocation is None:
            raise RuntimeError(f"job {self.jobs.id[index]} is not running")
        return allocation

    def _backfill(self, head: int, rest: np.ndarray, now: float, failed: set[int]) -> list[int]:
        # EASY (Lifka 1995): the head gets a reservation at the shadow time; a later job may start
        # now if it fits now and either ends (by its estimate) before the shadow time or only
        # uses resources still free at the shadow time after the head's reservation ("extra").
        shadow, extra = self._reservation(head, now)
        self._reservations.append((head, now, shadow))
        state = self._state
        free_gpus = int(state.free_gpus.sum())
        gpus = self._num_gpus
        # Vectorised pre-filter (necessary conditions): fits in the free GPU count now, and could
        # end before the shadow time on the fastest GPU type or fit in the extra GPUs.
        extra_total = int(extra.free_gpus.sum())
        fastest = float(self.cluster.type_speed.max())
        could_end = now + self._requested[rest] / fastest <= shadow
        candidates = rest[(gpus[rest] <= free_gpus) & (could_end | (gpus[rest] <= extra_total))]
        started: list[int] = []
        both = None
        extra_gpus = 0
        failed_both: set[int] = set()
        for index in candidates.tolist():
            need = int(gpus[index])
            shape = self._shape[index]
            if need > free_gpus or shape in failed:
                continue
            surely_long = now + self._requested[index] / fastest > shadow
            if surely_long and (shape in failed_both or (both is not None and need > extra_gpus)):
                continue
            request = self._requests[index]
            alloc = self.placer.place(request, state)
            if alloc is None:
                failed.add(shape)
                continue
            speed = self.cluster.speed_of(alloc.gpu_type) if need > 0 else 1.0
            if now + self._requested[index] / speed > shadow:
                # Runs past the shadow time: it must fit in what stays free both now and then.
                if both is None:
                    both = state.copy()
                    both.free_gpus = np.minimum(state.free_gpus, extra.free_gpus)
                    both.free_cpus = np.minimum(state.free_cpus, extra.free_cpus)
                    both.free_memory_mib = np.minimum(state.free_memory_mib, extra.free_memory_mib)
                    extra_gpus = int(both.free_gpus.sum())
                if need > extra_gpus or shape in failed_both:
                    continue
                alloc = self.placer.place(request, both)
                if alloc is None:
                    failed_both.add(shape)
                    continue
                extra.allocate(alloc)
            both = None  # the free resources changed; rebuild the intersection when needed
            self._start_job(index, alloc)
            started.append(index)
            free_gpus -= need
        return started

    def _backfill_rlscheduler(self, head: int, now: float, failed: set[int]) -> list[int]:
        # RLScheduler's rule (config module): the shadow time is computed once, when the head
        # first blocks; waiting jobs are scanned in submission order and one starts now if it
        # fits now and its estimated end is strictly before the shadow time. No extra-nodes rule.
        if self._shadow[0] != head:
            shadow, _ = self._reservation(head, now)
            self._shadow = (head, shadow)
            self._reservations.append((head, now, shadow))
        shadow = self._shadow[1]
        state = self._state
        free_gpus = int(state.free_gpus.sum())
        gpus = self._num_gpus
        queue = self._queue  # arrival order, which is submission order
        fastest = float(self.cluster.type_speed.max())
        candidates = queue[
            (queue != head)
            & np.isnan(self._start[queue])
            & (gpus[queue] <= free_gpus)
            & (now + self._requested[queue] / fastest < shadow)
        ]
        started: list[int] = []
        for index in candidates.tolist():
            need = int(gpus[index])
            shape = self._shape[index]
            if need > free_gpus or shape in failed:
                continue
            alloc = self.placer.place(self._requests[index], state)
            if alloc is None:
                failed.add(shape)
                continue
            speed = self.cluster.speed_of(alloc.gpu_type) if need > 0 else 1.0
            if not now + self._requested[index] / speed < shadow:
                continue  # on this GPU type it would run past the shadow time
            self._start_job(index, alloc)
            started.append(index)
            free_gpus -= need
        return started
