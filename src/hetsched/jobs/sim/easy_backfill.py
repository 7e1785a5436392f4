"""EASY backfilling's reservation (Lifka 1995; paper section 4.1): when the best-ranked waiting job
(the head) does not fit, when could it start, and what stays free for other jobs once it does.

Running jobs are assumed to end at their *estimated* ends (the requested time, scaled by the GPU
type's speed), as a real scheduler only knows those. The simulator then starts a later job now
only if it ends before the head's start (the shadow time) or fits in what stays free then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hetsched.jobs.cluster.model import Allocation
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, Placer


def head_reservation(
    state: ClusterState,
    request: JobRequest,
    running: Sequence[Allocation],
    ends_s: np.ndarray,
    placer: Placer,
) -> tuple[float, ClusterState]:
    """The shadow time (earliest estimated time the head fits; ``inf`` if never) and the free
    resources at that time once the head's reservation is taken out.

    Args:
        state: Free resources now (not changed).
        request: The head job.
        running: Allocations of the running jobs, ordered by ``ends_s``.
        ends_s: Their estimated ends, ascending.
        placer: Places the head on the projected free resources.
    """
    projected = state.copy()
    # The head cannot fit before enough GPUs are released on its eligible nodes, so skip
    # straight to the first running job whose end frees enough of them.
    free_eligible = int(projected.free_gpus[request.eligible].sum())
    freed: np.ndarray  # eligible GPUs freed once the first k running jobs have ended
    useful: np.ndarray  # whether a running job holds any node the head may use
    if running:
        nodes = np.concatenate([a.node_indices for a in running])
        owner = np.repeat(np.arange(len(running)), [a.num_nodes for a in running])
        eligible = request.eligible[nodes]
        on_eligible = np.concatenate([a.gpus for a in running]) * eligible
        freed = np.cumsum(np.bincount(owner, weights=on_eligible, minlength=len(running)))
        # Only a job holding an eligible node can make the head fit when it ends.
        useful = np.bincount(owner, weights=eligible, minlength=len(running)) > 0
    else:
        freed, useful = np.zeros(0), np.zeros(0, dtype=bool)
    first = int(np.searchsorted(freed, request.num_gpus - free_eligible))
    shadow_s = math.inf
    pending = list(running[:first])
    try_now = False
    for position in range(first, len(running)):
        pending.append(running[position])
        try_now = try_now or bool(useful[position])
        if position + 1 < len(running) and ends_s[position + 1] <= ends_s[position]:
            continue  # release everything that ends at the same instant first
        if not try_now:
            continue
        projected.release_all(pending)
        pending, try_now = [], False
        allocation = placer.place(request, projected)
        if allocation is not None:
            projected.allocate(allocation)
            shadow_s = float(ends_s[position])
            break
    if shadow_s == math.inf:
        projected.release_all(pending)
    return shadow_s, projected
