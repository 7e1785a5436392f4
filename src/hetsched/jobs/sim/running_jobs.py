"""The running jobs, kept in order of estimated end, with their allocations stored flat.

Why this shape: a backfilling scheduler asks, for every blocked head job, "when do enough of the
running jobs end?" (:func:`~hetsched.jobs.sim.easy_backfill.head_reservation`). Rebuilding that
order and gathering thousands of allocations at every pass made the simulator's cost grow with
the machine's load. Here the order is maintained on start and end (a binary search and one
memory move in NumPy), and the allocations of any prefix of that order are one gather from flat
per-node arrays, so a reservation costs a few vectorised operations.

Order: by estimated end, then job index (the order EASY releases running jobs in).
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.jobs.cluster.model import Allocation
from hetsched.jobs.cluster.state import ClusterState


class RunningJobs:
    """Running jobs ordered by (estimated end, index).

    Args:
        num_gpus: GPUs of every job of the table (job indices are its rows).
        holds_cpus_or_memory: Whether each job asks for CPUs or memory.
        total_gpus: GPUs of the cluster.

    Attributes:
        busy_gpus: GPUs held by running jobs.
        free_gpus: GPUs held by none (what the cluster state's free GPUs sum to).
    """

    def __init__(
        self, num_gpus: np.ndarray, holds_cpus_or_memory: np.ndarray, total_gpus: int
    ) -> None:
        num_jobs = len(num_gpus)
        self.busy_gpus = 0
        self.free_gpus = total_gpus
        self._gpus = num_gpus
        self._gpu_list = num_gpus.tolist()
        self._holds = holds_cpus_or_memory.tolist()
        self._count = 0
        self._index = np.empty(16, dtype=np.int64)  # job index, in end order
        self._end_s = np.empty(16)  # estimated end, in end order
        self._allocation: list[Allocation | None] = [None] * num_jobs
        self._est_end_s = [math.nan] * num_jobs
        # Flat per-node allocation entries; job j owns entries [first[j], first[j] + nodes[j]).
        self._first_entry = np.zeros(num_jobs, dtype=np.int64)
        self._nodes = np.zeros(num_jobs, dtype=np.int64)
        self._entries = 0
        self._entry_node = np.empty(16, dtype=np.int64)
        self._entry_gpus = np.empty(16, dtype=np.int64)
        self._entry_cpus = np.empty(16)
        self._entry_memory_mib = np.empty(16)
        self._multi_node = 0  # running jobs on more than one node
        self._holding_cpus_or_memory = 0  # running jobs holding CPUs or memory

    def __len__(self) -> int:
        return self._count

    # -- start and end ---------------------------------------------------------------------------
    def add(self, index: int, allocation: Allocation, est_end_s: float) -> None:
        """Records job ``index`` running on ``allocation`` until ``est_end_s`` (estimated)."""
        count = self._count
        if count == len(self._index):
            self._index = np.resize(self._index, 2 * count)
            self._end_s = np.resize(self._end_s, 2 * count)
        at = self._position(est_end_s, index, count)
        if at < count:
            self._index[at + 1 : count + 1] = self._index[at:count]
            self._end_s[at + 1 : count + 1] = self._end_s[at:count]
        self._index[at] = index
        self._end_s[at] = est_end_s
        self._count = count + 1
        self._allocation[index] = allocation
        self._est_end_s[index] = est_end_s
        self._store_entries(index, allocation)
        gpus = self._gpu_list[index]
        self.busy_gpus += gpus
        self.free_gpus -= gpus
        self._holding_cpus_or_memory += self._holds[index]

    def remove(self, index: int) -> Allocation:
        """Forgets running job ``index`` and returns its allocation."""
        allocation = self.allocation(index)
        count = self._count
        at = self._position(self._est_end_s[index], index, count)
        self._index[at : count - 1] = self._index[at + 1 : count]
        self._end_s[at : count - 1] = self._end_s[at + 1 : count]
        self._count = count - 1
        self._multi_node -= self._nodes[index] > 1
        gpus = self._gpu_list[index]
        self.busy_gpus -= gpus
        self.free_gpus += gpus
        self._holding_cpus_or_memory -= self._holds[index]
        return allocation

    def _position(self, est_end_s: float, index: int, count: int) -> int:
        """Where (``est_end_s``, ``index``) is, or goes, in the end order."""
        at = int(self._end_s[:count].searchsorted(est_end_s))
        while at < count and self._end_s[at] == est_end_s and self._index[at] < index:
            at += 1
        return at

    def _store_entries(self, index: int, allocation: Allocation) -> None:
        nodes = allocation.num_nodes
        start = self._entries
        if start + nodes > len(self._entry_node):
            size = 2 * (start + nodes)
            self._entry_node = np.resize(self._entry_node, size)
            self._entry_gpus = np.resize(self._entry_gpus, size)
            self._entry_cpus = np.resize(self._entry_cpus, size)
            self._entry_memory_mib = np.resize(self._entry_memory_mib, size)
        end = start + nodes
        self._entry_node[start:end] = allocation.node_indices
        self._entry_gpus[start:end] = allocation.gpus
        self._entry_cpus[start:end] = allocation.cpus
        self._entry_memory_mib[start:end] = allocation.memory_mib
        self._first_entry[index] = start
        self._nodes[index] = nodes
        self._multi_node += nodes > 1
        self._entries = end

    # -- queries ---------------------------------------------------------------------------------
    def allocation(self, index: int) -> Allocation:
        """Where job ``index`` runs (or ran).

        Raises:
            RuntimeError: If the job never started (a simulator bug).
        """
        allocation = self._allocation[index]
        if allocation is None:
            raise RuntimeError(f"job {index} never started")
        return allocation

    def allocations(self) -> list[Allocation | None]:
        """Every job's allocation (None for jobs that never started), by job index."""
        return self._allocation

    def earliest_end_s(self) -> float:
        """The earliest estimated end of a running job (inf when none runs)."""
        return float(self._end_s[0]) if self._count else float("inf")

    def ordered(self) -> tuple[np.ndarray, np.ndarray]:
        """(job indices, estimated ends) in end order (views: read, do not keep)."""
        return self._index[: self._count], self._end_s[: self._count]

    def total_gpus(self, indices: np.ndarray) -> np.ndarray:
        """GPUs each of ``indices`` holds."""
        return self._gpus[indices]

    def entries(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(entry positions, owner position in ``indices``) of the jobs' per-node entries."""
        if not self._multi_node:  # one entry per job: the common case, one gather
            return self._first_entry[indices], np.arange(len(indices))
        counts = self._nodes[indices]
        owner = np.repeat(np.arange(len(indices)), counts)
        starts = np.repeat(self._first_entry[indices] - np.cumsum(counts) + counts, counts)
        return starts + np.arange(len(owner)), owner

    def entry_nodes(self, entries: np.ndarray) -> np.ndarray:
        """Node of each entry."""
        return self._entry_node[entries]

    def entry_gpus(self, entries: np.ndarray) -> np.ndarray:
        """GPUs of each entry."""
        return self._entry_gpus[entries]

    def release_into(self, state: ClusterState, indices: np.ndarray) -> None:
        """Adds the resources of jobs ``indices`` to ``state`` (a projection: the jobs keep
        running): per node, the sum of what they hold there."""
        if len(indices) == 0:
            return
        entries, _ = self.entries(indices)
        nodes = self._entry_node[entries]
        size = len(state.free_gpus)
        gpus = np.bincount(nodes, weights=self._entry_gpus[entries], minlength=size)
        state.free_gpus += gpus.astype(np.int64)
        if self._holding_cpus_or_memory:  # CPU traces hold none: two sums saved per release
            cpus = np.bincount(nodes, weights=self._entry_cpus[entries], minlength=size)
            state.free_cpus += cpus
            memory = np.bincount(nodes, weights=self._entry_memory_mib[entries], minlength=size)
            state.free_memory_mib += memory
