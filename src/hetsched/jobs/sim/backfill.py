"""The two backfilling rules: which waiting jobs start now while the head job is blocked.

Both take the head's shadow time from :func:`~hetsched.jobs.sim.easy_backfill.head_reservation`
and start jobs through the simulator (:class:`BackfillContext`); they differ as the queue-mode
documentation in :mod:`hetsched.jobs.sim.config` lists:

- :func:`easy_backfill` (EASY, Lifka 1995; paper section 4.1): candidates in priority order; a
  job starts if it fits now and either ends (by its estimate) at or before the shadow time, or
  only uses resources still free at the shadow time once the head has its reservation;
- :func:`rlscheduler_backfill` (RLScheduler, ``HPCSimPickJobs``'s backfilling): candidates in
  submission order; a job starts if it fits now and ends strictly before the shadow time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from hetsched.jobs.cluster.model import Allocation, Cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import Placer
from hetsched.jobs.sim.job_shapes import JobShapes
from hetsched.jobs.sim.running_jobs import RunningJobs

#: Below this many candidates the per-job tests in Python beat a vectorised pre-filter.
VECTOR_FILTER_MIN = 16
#: Candidates filtered in the first slice of a scan (see :func:`scan_chunks`).
SCAN_CHUNK = 256


@dataclass
class BackfillContext:
    """What a backfilling rule reads, and how it starts a job.

    Attributes:
        state: Free resources now (changed by ``start``).
        running: The running jobs (their free-GPU count is the state's, without a sum).
        waiting: Mask over jobs still waiting (candidate lists may hold started ones).
        cluster: The cluster (speed factors).
        placer: Places a job on free resources.
        shapes: Each job's request and shape code.
        num_gpus: GPUs per job.
        requested_s: Requested time per job (the estimate a scheduler knows).
        start: Starts a job on an allocation now.
    """

    state: ClusterState
    running: RunningJobs
    waiting: np.ndarray
    cluster: Cluster
    placer: Placer
    shapes: JobShapes
    num_gpus: np.ndarray
    requested_s: np.ndarray
    start: Callable[[int, Allocation], None]
    shortest_run_s: np.ndarray = field(init=False)
    smallest_job_gpus: int = field(init=False)

    def __post_init__(self) -> None:
        # Each job's requested time on the fastest GPU type: no end can be earlier.
        self.shortest_run_s = self.requested_s / float(self.cluster.type_speed.max())
        self.smallest_job_gpus = int(self.num_gpus.min()) if len(self.num_gpus) else 0

    def estimated_end_s(self, index: int, allocation: Allocation, now_s: float) -> float:
        """When job ``index`` would end by its estimate if started now on ``allocation``."""
        if self.num_gpus[index] == 0:
            return now_s + float(self.requested_s[index])
        return now_s + float(self.requested_s[index]) / self.cluster.speed_of(allocation.gpu_type)


def easy_backfill(
    ctx: BackfillContext,
    candidates: np.ndarray,
    now_s: float,
    shadow_s: float,
    extra: ClusterState,
    failed: set[int],
) -> tuple[list[int], bool]:
    """EASY's backfilling pass over ``candidates`` (waiting jobs behind the head, in priority
    order). ``extra`` is the free resources at the shadow time after the head's reservation;
    jobs that run past the shadow time take from it. ``failed`` holds shapes that did not fit
    now in this pass (updated).

    Returns:
        The jobs started, and whether any of them runs past the shadow time (``extra`` changed).
    """
    if len(candidates) == 0:
        return [], False
    state = ctx.state
    gpus = ctx.num_gpus
    shape_of = ctx.shapes.of_job
    shortest_s = ctx.shortest_run_s
    extra_total = int(extra.free_gpus.sum())
    started: list[int] = []
    extra_changed = False
    both = None
    extra_gpus = 0
    failed_both: set[int] = set()
    for chunk in scan_chunks(candidates):
        if ctx.running.free_gpus < ctx.smallest_job_gpus:
            break  # nothing more can start now
        if len(chunk) > VECTOR_FILTER_MIN:
            # The loop's first tests, vectorised: fits in the free GPU count now, and could end
            # before the shadow time on the fastest GPU type or fit in the extra GPUs (that test
            # is left out where its answer is known: the extra GPUs hold no job, or every job
            # that fits now).
            need_all = gpus[chunk]
            free_gpus = ctx.running.free_gpus
            keep = (need_all <= free_gpus) & ctx.waiting[chunk]
            if extra_total < free_gpus:
                could_end = now_s + shortest_s[chunk] <= shadow_s
                if extra_total >= ctx.smallest_job_gpus:
                    could_end |= need_all <= extra_total
                keep &= could_end
            chunk = chunk[keep]
        for position in range(len(chunk)):  # not tolist(): the scan often stops early
            free_gpus = ctx.running.free_gpus
            if free_gpus < ctx.smallest_job_gpus:
                break
            index = int(chunk[position])
            need = int(gpus[index])
            shape = int(shape_of[index])
            if need > free_gpus or shape in failed or not ctx.waiting[index]:
                continue
            if now_s + shortest_s[index] > shadow_s:  # surely runs past the shadow time
                if need > extra_total or shape in failed_both:
                    continue
                if both is not None and need > extra_gpus:
                    continue
            request = ctx.shapes.requests[shape]
            alloc = ctx.placer.place(request, state)
            if alloc is None:
                failed.add(shape)
                continue
            if ctx.estimated_end_s(index, alloc, now_s) > shadow_s:
                # Runs past the shadow time: it must fit in what stays free both now and then.
                if both is None:
                    both = state.copy()
                    both.free_gpus = np.minimum(state.free_gpus, extra.free_gpus)
                    both.free_cpus = np.minimum(state.free_cpus, extra.free_cpus)
                    both.free_memory_mib = np.minimum(state.free_memory_mib, extra.free_memory_mib)
                    extra_gpus = int(both.free_gpus.sum())
                if need > extra_gpus or shape in failed_both:
                    continue
                alloc = ctx.placer.place(request, both)
                if alloc is None:
                    failed_both.add(shape)
                    continue
                extra.allocate(alloc)
                extra_changed = True
            both = None  # the free resources changed; rebuild the intersection when needed
            ctx.start(index, alloc)
            started.append(index)
    return started, extra_changed


def rlscheduler_backfill(
    ctx: BackfillContext,
    waiting: np.ndarray,
    now_s: float,
    shadow_s: float,
    failed: set[int],
) -> list[int]:
    """RLScheduler's backfilling pass: ``waiting`` (the waiting jobs other than the head, in
    submission order) are started in that order when they fit now and end, by their estimate,
    strictly before ``shadow_s``. ``failed`` as in :func:`easy_backfill`."""
    state = ctx.state
    gpus = ctx.num_gpus
    shape_of = ctx.shapes.of_job
    started: list[int] = []
    for chunk in scan_chunks(waiting):
        if ctx.running.free_gpus < ctx.smallest_job_gpus:
            break  # nothing more can start now
        if len(chunk) > VECTOR_FILTER_MIN:
            could_end = now_s + ctx.shortest_run_s[chunk] < shadow_s
            fits_now = (gpus[chunk] <= ctx.running.free_gpus) & ctx.waiting[chunk]
            chunk = chunk[fits_now & could_end]
        for position in range(len(chunk)):  # not tolist(): the scan often stops early
            if ctx.running.free_gpus < ctx.smallest_job_gpus:
                break
            index = int(chunk[position])
            need = int(gpus[index])
            shape = int(shape_of[index])
            if need > ctx.running.free_gpus or shape in failed or not ctx.waiting[index]:
                continue
            if not now_s + ctx.shortest_run_s[index] < shadow_s:
                continue
            alloc = ctx.placer.place(ctx.shapes.requests[shape], state)
            if alloc is None:
                failed.add(shape)
                continue
            if not ctx.estimated_end_s(index, alloc, now_s) < shadow_s:
                continue  # on this GPU type it would run past the shadow time
            ctx.start(index, alloc)
            started.append(index)
    return started


def scan_chunks(jobs: np.ndarray) -> Iterator[np.ndarray]:
    """``jobs`` in consecutive slices, the first :data:`SCAN_CHUNK` long and each next one four
    times longer: a scan filters one slice at a time and stops once nothing more fits, so it
    costs what the queue's head does when the free resources fill early, and a few vectorised
    steps over the whole queue when they do not."""
    first, size = 0, SCAN_CHUNK
    while first < len(jobs):
        yield jobs[first : first + size]
        first, size = first + size, 4 * size
