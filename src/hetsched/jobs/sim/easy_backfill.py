"""EASY backfilling's reservation (Lifka 1995; paper section 4.1): when the best-ranked waiting job
(the head) does not fit, when could it start, and what stays free for other jobs once it does.

Running jobs are assumed to end at their *estimated* ends (the requested time, scaled by the GPU
type's speed), as a real scheduler only knows those; an end already past counts as now. The
simulator then starts a later job now only if it ends before the head's start (the shadow time)
or fits in what stays free then. RLScheduler's rule uses the same shadow time.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, Placer
from hetsched.jobs.sim.running_jobs import RunningJobs


def head_reservation(
    state: ClusterState,
    request: JobRequest,
    running: RunningJobs,
    now_s: float,
    placer: Placer,
) -> tuple[float, ClusterState]:
    """The shadow time (earliest estimated time the head fits; ``inf`` if never) and the free
    resources at that time once the head's reservation is taken out.

    Running jobs are released in order of estimated end, all jobs ending at one instant
    together, and the head is placed after each instant that freed a node it may use.

    Args:
        state: Free resources now (not changed).
        request: The head job.
        running: The running jobs.
        now_s: The current time (estimated ends before it count as now).
        placer: Places the head on the projected free resources.
    """
    projected = state.copy()
    indices, ends_s = running.ordered()
    count = len(indices)
    if count and ends_s[0] < now_s:
        ends_s = np.maximum(ends_s, now_s)
    eligible = request.eligible
    # The head cannot fit before enough GPUs are released on its eligible nodes, so skip
    # straight to the first running job whose end frees enough of them.
    if eligible.all():
        on_eligible = running.total_gpus(indices)
        useful_before = None  # every running job holds a node the head may use
        free_eligible = running.free_gpus
    else:
        entries, owner = running.entries(indices)
        held = eligible[running.entry_nodes(entries)]
        on_eligible = np.bincount(
            owner, weights=running.entry_gpus(entries) * held, minlength=count
        )
        # Only a job holding an eligible node can make the head fit when it ends.
        useful = np.bincount(owner, weights=held, minlength=count) > 0
        useful_before = np.concatenate(([0], np.cumsum(useful)))
        free_eligible = int(projected.free_gpus[eligible].sum())
    position = int(np.searchsorted(np.cumsum(on_eligible), request.num_gpus - free_eligible))
    released = 0  # jobs [0, released) are in ``projected``
    tried = 0  # useful jobs released when the head was last tried
    while position < count:
        # Release everything that ends at this instant, then try the head.
        position = int(np.searchsorted(ends_s, ends_s[position], side="right")) - 1
        if useful_before is not None:
            if useful_before[position + 1] == tried:
                position += 1
                continue  # nothing released since the last try frees a node the head may use
            tried = int(useful_before[position + 1])
        running.release_into(projected, indices[released : position + 1])
        released = position + 1
        allocation = placer.place(request, projected)
        if allocation is not None:
            projected.allocate(allocation)
            return float(ends_s[position]), projected
        position += 1
    running.release_into(projected, indices[released:])
    return math.inf, projected
