"""One scan of a live Slurm cluster as the simulator's state: cluster, free resources, queue.

A policy written for the simulator reads a :class:`~hetsched.jobs.policies.QueueState`; this
module builds exactly that from ``sinfo``/``squeue`` (section 3.1.2: the evaluation pipeline
"reuses the same Feature Building ... modules"), so the same policy object runs in both worlds.

Mapping choices (documented, since Slurm and the simulator see the world differently):
- times are seconds since ``origin_s`` (the adapter's first scan), not Unix time: F1's
  ``log10(submit)`` would otherwise be flat across jobs;
- the requested time is the job comment's ``hetsched:requested_s`` when present, else the time
  limit (see :class:`~hetsched.jobs.slurm.records.SlurmJob`); the run time is unknown (NaN);
- node memory is not a constraint (Slurm's ``CR_Core`` does not track it), and nodes Slurm cannot
  use (down, drained) have no free resources;
- the completed-job history (fair share, QSSF) holds the jobs the adapter saw finish.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.slurm.records import SlurmJob, SlurmNode
from hetsched.jobs.traces.job_table import REQUESTED_FROM_TRACE, JobTable


@dataclass(frozen=True)
class Completion:
    """A job the adapter saw finish (for fair share and QSSF's history)."""

    user: str
    num_gpus: int
    run_time_s: float
    end_s: float


@dataclass
class Snapshot:
    """The pending jobs of one scan and the policy's view of them.

    Attributes:
        pending: The pending jobs, in queue order (row ``i`` of ``queue_state.jobs``).
        queue_state: What the policy scores.
    """

    pending: list[SlurmJob]
    queue_state: QueueState


def build_cluster(nodes: Sequence[SlurmNode], partition: str | None) -> ClusterState:
    """The cluster of the nodes in ``partition`` (all nodes for None), with free resources.

    Raises:
        HetschedError: If no node is in the partition.
    """
    chosen = [n for n in nodes if partition is None or partition in n.partitions]
    if not chosen:
        raise HetschedError(f"no Slurm node in partition {partition!r}")
    cluster = Cluster(
        [Node(n.name, n.gpu_type, n.num_gpus, float(max(n.cpus, 1))) for n in chosen],
        name=f"slurm:{partition or 'all'}",
    )
    state = ClusterState(cluster)
    usable = np.array([n.usable for n in chosen])
    state.free_gpus = np.where(usable, [max(n.num_gpus - n.used_gpus, 0) for n in chosen], 0)
    state.free_cpus = np.where(usable, [float(max(n.cpus - n.alloc_cpus, 0)) for n in chosen], 0.0)
    return state


def build_queue_table(pending: Sequence[SlurmJob], origin_s: float) -> JobTable:
    """The pending jobs as a job table (times relative to ``origin_s``, run time unknown)."""
    n = len(pending)
    return JobTable(
        {
            "id": [str(j.job_id) for j in pending],
            "submit_time_s": [j.submit_time_s - origin_s for j in pending],
            "run_time_s": np.full(n, np.nan),
            "num_gpus": [j.num_gpus for j in pending],
            "requested_time_s": [
                j.requested_time_s if math.isfinite(j.requested_time_s) else np.nan for j in pending
            ],
            "user": [j.user for j in pending],
            "group": [""] * n,
            "virtual_cluster": [None] * n,
            "gpu_types": [None] * n,
            "cpus": [float(j.cpus) for j in pending],
            "memory_mib": np.zeros(n),
            "status": ["pending"] * n,
            "qos": [""] * n,
            "requested_source": [REQUESTED_FROM_TRACE] * n,
        }
    )


def take_snapshot(
    jobs: Sequence[SlurmJob],
    nodes: Sequence[SlurmNode],
    now_s: float,
    origin_s: float,
    completions: Sequence[Completion] = (),
    partition: str | None = None,
    default_requested_s: float = 3600.0,
) -> Snapshot:
    """The policy's view of the pending ``jobs`` on ``nodes`` at Unix time ``now_s``.

    Args:
        jobs: Pending jobs to score (already filtered by partition/user).
        nodes: Every node (filtered here by ``partition``).
        now_s: Unix time of the scan.
        origin_s: Unix time that becomes t = 0.
        completions: Jobs seen finishing so far.
        partition: Only nodes of this partition form the cluster.
        default_requested_s: Requested time of jobs without a time limit.
    """
    pending = sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id))
    table = build_queue_table(pending, origin_s)
    requested = np.where(
        np.isnan(table.requested_time_s), default_requested_s, table.requested_time_s
    )
    table = table.with_columns(requested_time_s=requested)
    users = sorted({j.user for j in pending} | {c.user for c in completions})
    code = {user: i for i, user in enumerate(users)}
    history = UsageHistory(len(users))
    for c in sorted(completions, key=lambda c: c.end_s):
        history.record_completion(code[c.user], c.num_gpus, c.run_time_s, c.end_s - origin_s)
    user_codes = np.array([code[j.user] for j in pending], dtype=np.int64)
    state = build_cluster(nodes, partition)
    queue_state = QueueState(
        jobs=table,
        queue=np.arange(len(pending), dtype=np.int64),
        now_s=now_s - origin_s,
        cluster=state.cluster,
        cluster_state=state,
        history=history,
        user_codes=user_codes,
    )
    return Snapshot(pending, queue_state)
