"""What each job asks of the cluster, grouped into shapes.

A job's *shape* is what a placer sees of it: the nodes it may use (its GPU-type constraint and
virtual cluster), its GPUs, CPUs and memory. Jobs of one shape fit or fail together, so the
simulator keeps one :class:`~hetsched.jobs.placement.placers.JobRequest` per shape (not per job)
and, within a scheduling pass, rules out a whole shape after one failed placement. A production
trace of 450,000 jobs has a few hundred shapes, which is what keeps set-up linear and cheap.
"""

from __future__ import annotations

import numpy as np

from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, Placer
from hetsched.jobs.traces.job_table import JobTable


class JobShapes:
    """Shape code per job and one request per shape.

    Args:
        jobs: The job table.
        cluster: The cluster whose nodes the eligibility masks are over.

    Attributes:
        of_job: Shape code of every job (int64, one per row of ``jobs``).
        requests: The request of each shape code.
    """

    def __init__(self, jobs: JobTable, cluster: Cluster) -> None:
        mask_codes: dict[tuple, int] = {}
        masks: list[np.ndarray] = []
        mask_of_job = np.empty(len(jobs), dtype=np.int64)
        pairs = zip(jobs.gpu_types.tolist(), jobs.virtual_cluster.tolist(), strict=True)
        for i, key in enumerate(pairs):
            code = mask_codes.get(key)
            if code is None:
                code = mask_codes[key] = len(masks)
                masks.append(cluster.type_mask(key[0]) & cluster.vc_mask(key[1]))
            mask_of_job[i] = code
        keys = np.stack(
            [mask_of_job, jobs.num_gpus, jobs.cpus, jobs.memory_mib], axis=1, dtype=np.float64
        )
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        self.of_job = inverse.reshape(-1).astype(np.int64)
        self.requests: list[JobRequest] = [
            JobRequest(
                int(jobs.num_gpus[j]),
                float(jobs.cpus[j]),
                float(jobs.memory_mib[j]),
                masks[int(mask_of_job[j])],
            )
            for j in first.tolist()
        ]

    def request(self, index: int) -> JobRequest:
        """The request of job ``index``."""
        return self.requests[int(self.of_job[index])]

    def unrunnable(self, cluster: Cluster, placer: Placer) -> np.ndarray:
        """Indices of the jobs that cannot be placed even on the empty cluster."""
        empty = ClusterState(cluster)
        never = np.array([placer.place(r, empty) is None for r in self.requests], dtype=bool)
        return np.flatnonzero(never[self.of_job]).astype(np.int64)
