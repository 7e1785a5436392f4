"""What a priority policy sees, and the one signature every policy has.

A policy maps a read-only :class:`QueueState` snapshot (the waiting jobs' columns, the cluster's
free resources, the completed-job history, the simulated time) to one score per queued job; lower
runs first. The simulator and the Slurm adapter build the same snapshot, so a policy runs
unchanged in simulation and live.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.traces.job_table import JobTable


@dataclass
class QueueState:
    """What a policy may look at: the queue, the cluster and the past, at ``now_s``.

    Attributes:
        jobs: The whole job table (requested times already filled by the estimate model).
        queue: Indices into ``jobs`` of the waiting jobs, ascending (= submission order).
        now_s: Simulated time.
        cluster: The cluster.
        cluster_state: Free resources now (read it, do not change it).
        history: Completed-job history and decayed usage.
        user_codes: User code per row of ``jobs`` (for fair share and QSSF).
    """

    jobs: JobTable
    queue: np.ndarray
    now_s: float
    cluster: Cluster
    cluster_state: ClusterState
    history: UsageHistory
    user_codes: np.ndarray

    @property
    def submit_time_s(self) -> np.ndarray:
        """Submit time of each queued job."""
        return self.jobs.submit_time_s[self.queue]

    @property
    def wait_time_s(self) -> np.ndarray:
        """How long each queued job has waited so far."""
        return self.now_s - self.jobs.submit_time_s[self.queue]

    @property
    def requested_time_s(self) -> np.ndarray:
        """Requested (estimated) time of each queued job, at least 1 s."""
        return np.maximum(self.jobs.requested_time_s[self.queue], 1.0)

    @property
    def num_gpus(self) -> np.ndarray:
        """GPUs of each queued job, at least 1 (CPU-only jobs count as size 1)."""
        return np.maximum(self.jobs.num_gpus[self.queue], 1).astype(np.float64)


class PriorityPolicy(Protocol):
    """A queue-ordering policy; lower score = scheduled first."""

    name: str

    def score(self, state: QueueState) -> np.ndarray:
        """One score per job in ``state.queue``."""
        ...


@runtime_checkable
class HoldingPolicy(PriorityPolicy, Protocol):
    """A policy that may keep every job waiting for one pass (SchedInspector rejecting the base
    policy's pick): when :meth:`holding` is True right after :meth:`score`, the pass starts nothing
    and the queue waits for the next arrival or completion."""

    def holding(self) -> bool:
        """Whether the pass just scored must start nothing."""
        ...
