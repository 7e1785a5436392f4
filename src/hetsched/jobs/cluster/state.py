"""The mutable part of a cluster that the simulator, the placers and the Slurm snapshot share:
free GPUs, CPUs and memory per node, with allocation and release that refuse to over-allocate; and
how fragmented the free GPUs are (the paper's eq. 3).
"""

from __future__ import annotations

import numpy as np

from hetsched.jobs.cluster.model import Allocation, Cluster


class ClusterState:
    """Free GPUs, CPUs and memory per node; allocation refuses to over-allocate.

    Args:
        cluster: The cluster whose nodes start fully free.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free_gpus = cluster.node_gpus.copy()
        self.free_cpus = cluster.node_cpus.copy()
        self.free_memory_mib = cluster.node_memory_mib.copy()

    def copy(self) -> ClusterState:
        """An independent copy (for look-ahead: EASY reservations, candidate placements)."""
        other = ClusterState.__new__(ClusterState)
        other.cluster = self.cluster
        other.free_gpus = self.free_gpus.copy()
        other.free_cpus = self.free_cpus.copy()
        other.free_memory_mib = self.free_memory_mib.copy()
        return other

    @property
    def busy_gpus(self) -> int:
        """GPUs allocated right now."""
        return int(self.cluster.node_gpus.sum() - self.free_gpus.sum())

    def fits(self, allocation: Allocation) -> bool:
        """Whether ``allocation`` fits in the free resources now."""
        idx = allocation.node_indices
        # A tiny tolerance absorbs float error from splitting CPUs/memory across nodes.
        return bool(
            np.all(self.free_gpus[idx] >= allocation.gpus)
            and np.all(self.free_cpus[idx] >= allocation.cpus - 1e-9)
            and np.all(self.free_memory_mib[idx] >= allocation.memory_mib - 1e-9)
        )

    def allocate(self, allocation: Allocation) -> None:
        """Takes ``allocation``'s resources.

        Raises:
            RuntimeError: If any node would go below zero (a placer bug, never a user error).
        """
        idx = allocation.node_indices
        gpus = self.free_gpus[idx] - allocation.gpus
        cpus = self.free_cpus[idx] - allocation.cpus
        memory = self.free_memory_mib[idx] - allocation.memory_mib
        # The same test as ``fits`` on the differences (one gather per resource, not two).
        if min(gpus.tolist()) < 0 or min(cpus.tolist()) < -1e-9 or min(memory.tolist()) < -1e-9:
            raise RuntimeError(f"allocation {allocation.key()} over-allocates a node")
        self.free_gpus[idx] = gpus
        self.free_cpus[idx] = cpus
        self.free_memory_mib[idx] = memory

    def release(self, allocation: Allocation) -> None:
        """Returns ``allocation``'s resources (its nodes are distinct, so one in-place add per
        resource).

        Raises:
            RuntimeError: If a node would exceed its capacity (a double release).
        """
        idx = allocation.node_indices
        gpus = self.free_gpus[idx] + allocation.gpus
        if (gpus > self.cluster.node_gpus[idx]).any():
            raise RuntimeError("an allocation was released twice")
        self.free_gpus[idx] = gpus
        self.free_cpus[idx] += allocation.cpus
        self.free_memory_mib[idx] += allocation.memory_mib


def fragmentation_factor(free_gpus: np.ndarray) -> float:
    """Eq. 3 of the paper, the cluster fragmentation factor of the free GPUs of some nodes.

    As printed, ``1 − Σ free² / total_free`` has units of GPUs (one node with 8 free GPUs gives
    −7), so we use the Herfindahl form ``1 − Σ free² / (Σ free)²``: 0 when all free GPUs sit on
    one node, ``1 − 1/n`` when they are spread evenly over n nodes, normalised by its maximum
    ``1 − 1/N`` over the N nodes given.
    """
    n = len(free_gpus)
    total = float(free_gpus.sum())
    if n < 2 or total <= 0:
        return 0.0
    raw = 1.0 - float(np.square(free_gpus, dtype=np.float64).sum()) / total**2
    return raw / (1.0 - 1.0 / n)
