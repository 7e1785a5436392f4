"""Replaying a trace's virtual clusters (partitions) on a cluster that has different ones."""

from __future__ import annotations

import numpy as np

from hetsched.jobs.cluster.model import Cluster


def map_virtual_clusters(
    jobs_vc: np.ndarray, gpu_seconds: np.ndarray, cluster: Cluster
) -> dict[str, str]:
    """Maps a trace's virtual clusters onto ``cluster``'s, for replaying e.g. real Helios VCs on
    the paper's VC1-VC5 slice.

    Trace VCs are ranked by GPU-seconds demanded, cluster VCs by GPU count; the busiest trace VC
    goes to the largest cluster VC, and so on round-robin (so several small trace VCs share a
    cluster VC). VCs the cluster already has map to themselves. Returns {trace VC: cluster VC};
    empty when the cluster has no VCs (every node is shared then).
    """
    if not cluster.virtual_clusters:
        return {}
    demand: dict[str, float] = {}
    for vc, gpu_s in zip(jobs_vc.tolist(), gpu_seconds.tolist(), strict=True):
        if vc is not None:
            demand[vc] = demand.get(vc, 0.0) + gpu_s
    size = {
        vc: int(cluster.node_gpus[cluster.node_vc_code == i].sum())
        for i, vc in enumerate(cluster.virtual_clusters)
    }
    targets = sorted(size, key=lambda vc: (-size[vc], vc))
    mapping = {vc: vc for vc in demand if vc in size}
    foreign = sorted((vc for vc in demand if vc not in size), key=lambda vc: (-demand[vc], vc))
    for rank, vc in enumerate(foreign):
        mapping[vc] = targets[rank % len(targets)]
    return mapping
