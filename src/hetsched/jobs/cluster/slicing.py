"""Cluster slices: a stratified fraction of a cluster's nodes, for realistic contention.

The paper trains on "a representative cluster slice chosen to maintain realistic contention"
(section 4.2). The Alibaba GPU 2023 node list has 1,213 nodes for an average demand of ~18 GPUs,
so every policy waits 0 s on the full cluster and there is nothing to learn; :func:`slice_cluster`
keeps a stratified fraction of the nodes (every node shape survives, so every job still fits).
"""

from __future__ import annotations

import math

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster


def slice_cluster(cluster: Cluster, fraction: float) -> Cluster:
    """Keeps ``ceil(fraction x count)`` nodes of every node shape (GPU type, GPUs, CPUs, memory,
    virtual cluster), the first ones in node order, so the slice is deterministic and every job
    that fits the whole cluster still fits a node of the slice.

    Raises:
        HetschedError: If ``fraction`` is not in (0, 1].
    """
    if not 0 < fraction <= 1:
        raise HetschedError(f"cluster fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return cluster
    groups: dict[tuple, list[int]] = {}
    for i, node in enumerate(cluster.nodes):
        key = (node.gpu_type, node.num_gpus, node.cpus, node.memory_mib, node.virtual_cluster)
        groups.setdefault(key, []).append(i)
    keep = sorted(
        i for members in groups.values() for i in members[: math.ceil(fraction * len(members))]
    )
    nodes = [cluster.nodes[i] for i in keep]
    return Cluster(nodes, dict(cluster.speed_factors), f"{cluster.name}x{fraction:g}")
