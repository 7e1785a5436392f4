"""Typed views of what Slurm 22.05 prints: ``squeue --json`` jobs and ``sinfo --json`` nodes.

Only the fields the adapter needs are kept, each converted to the units used everywhere else
(seconds, whole GPUs). The parsers accept exactly the 22.05 JSON shape (captured fixtures in
``tests/jobs/slurm/fixtures``) and raise :class:`~hetsched.core.errors.DataError` naming the
field when a record does not have it, so a changed Slurm version fails loudly, not silently.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from hetsched.core.errors import DataError

#: Job states in which a job still waits for resources (``squeue``'s ``job_state``).
PENDING_STATES = frozenset({"PENDING"})
#: Job states in which a job holds resources.
RUNNING_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"})

#: A requested time written by :mod:`hetsched.jobs.slurm.workload` into the job's comment,
#: finer than Slurm's whole-minute time limits (see :attr:`SlurmJob.requested_time_s`).
REQUESTED_COMMENT = re.compile(r"hetsched:requested_s=([0-9.eE+-]+)")


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as ``squeue --json`` reports it.

    Attributes:
        job_id: Slurm's job id.
        name: Job name.
        user: User name.
        partition: Partition (may be a comma-separated list while pending).
        state: ``job_state`` (PENDING, RUNNING, COMPLETED, ...).
        priority: Current priority (0 = held).
        submit_time_s: Submission time, Unix seconds.
        start_time_s: Start time, Unix seconds (0 while pending).
        end_time_s: End time or, while running, the time-limit end, Unix seconds.
        time_limit_s: Time limit in seconds (``inf`` for none).
        requested_time_s: The requested time the policy sees: the comment's
            ``hetsched:requested_s=`` when present (the workload submitter writes it, since Slurm
            keeps time limits in whole minutes), else the time limit.
        num_gpus: GPUs per node times nodes (from ``tres_per_node`` ``gres:gpu[:type]:k``).
        cpus: CPUs requested.
        num_nodes: Nodes requested or allocated.
        shared: ``shared`` as printed: None (OverSubscribe=OK), "none" (exclusive), "shared".
        comment: The job's comment.
    """

    job_id: int
    name: str
    user: str
    partition: str
    state: str
    priority: int
    submit_time_s: float
    start_time_s: float
    end_time_s: float
    time_limit_s: float
    requested_time_s: float
    num_gpus: int
    cpus: int
    num_nodes: int
    shared: str | None
    comment: str

    @property
    def pending(self) -> bool:
        """Waiting for resources (its priority still matters)."""
        return self.state in PENDING_STATES

    @property
    def running(self) -> bool:
        """Holding resources now."""
        return self.state in RUNNING_STATES


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node as ``sinfo --json`` reports it.

    Attributes:
        name: Node name.
        partitions: Partitions the node belongs to.
        state: Node state (idle, mixed, allocated, drained, down, ...).
        cpus: Configured CPUs.
        alloc_cpus: CPUs allocated now.
        memory_mib: Configured memory, MiB.
        gpu_type: GPU type from ``gpu:TYPE:k`` ("gpu" when the gres names no type).
        num_gpus: Configured GPUs.
        used_gpus: GPUs allocated now.
    """

    name: str
    partitions: tuple[str, ...]
    state: str
    cpus: int
    alloc_cpus: int
    memory_mib: float
    gpu_type: str
    num_gpus: int
    used_gpus: int

    @property
    def usable(self) -> bool:
        """Whether Slurm can start jobs on the node (not down, drained or failing)."""
        return not any(s in self.state for s in ("down", "drain", "fail", "unknown"))


def _field(record: dict[str, Any], name: str, what: str) -> Any:
    if name not in record:
        raise DataError(f"{what} has no {name!r} (is this Slurm 22.05's JSON?)", field=name)
    return record[name]


def _load(text: str, source: str) -> dict[str, Any]:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{source} printed invalid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise DataError(f"{source} printed JSON that is not an object")
    errors = payload.get("errors") or []
    if errors:
        raise DataError(f"{source} reported errors: {errors}")
    return payload


def parse_gres_gpus(text: str | None) -> tuple[str, int]:
    """(GPU type, count) from a gres string such as ``gpu:4``, ``gpu:a100:2(IDX:0-1)`` or
    ``gres:gpu:2``; ("gpu", 0) when it lists no GPU."""
    for item in re.split(r",(?![^(]*\))", text or ""):
        parts = re.sub(r"\(.*\)$", "", item.strip()).split(":")
        if parts and parts[0] == "gres":
            parts = parts[1:]
        if not parts or parts[0] != "gpu":
            continue
        try:
            count = int(parts[-1]) if len(parts) > 1 else 1
        except ValueError:
            raise DataError(f"bad GPU count in gres {text!r}", field="gres") from None
        return (parts[1] if len(parts) == 3 else "gpu"), count
    return "gpu", 0


def _requested_time_s(comment: str, time_limit_s: float) -> float:
    match = REQUESTED_COMMENT.search(comment or "")
    return float(match.group(1)) if match else time_limit_s


def parse_job(record: dict[str, Any]) -> SlurmJob:
    """One element of ``squeue --json``'s ``jobs`` list."""
    what = f"squeue job {record.get('job_id', '?')}"
    limit_min = _field(record, "time_limit", what)
    time_limit_s = math.inf if limit_min in (None, 0) else 60.0 * float(limit_min)
    nodes = int(_field(record, "node_count", what) or 1)
    _, per_node = parse_gres_gpus(_field(record, "tres_per_node", what))
    _, per_job = parse_gres_gpus(record.get("tres_per_job", ""))
    comment = record.get("comment") or ""
    return SlurmJob(
        job_id=int(_field(record, "job_id", what)),
        name=str(record.get("name", "")),
        user=str(_field(record, "user_name", what)),
        partition=str(_field(record, "partition", what)),
        state=str(_field(record, "job_state", what)),
        priority=int(_field(record, "priority", what) or 0),
        submit_time_s=float(_field(record, "submit_time", what)),
        start_time_s=float(_field(record, "start_time", what) or 0),
        end_time_s=float(_field(record, "end_time", what) or 0),
        time_limit_s=time_limit_s,
        requested_time_s=_requested_time_s(comment, time_limit_s),
        num_gpus=per_job or per_node * nodes,
        cpus=int(_field(record, "cpus", what) or 1),
        num_nodes=nodes,
        shared=record.get("shared"),
        comment=comment,
    )


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Every job of ``squeue --json``'s output, in the order printed."""
    payload = _load(text, "squeue --json")
    return [parse_job(record) for record in _field(payload, "jobs", "squeue --json")]


def parse_node(record: dict[str, Any]) -> SlurmNode:
    """One element of ``sinfo --json``'s ``nodes`` list."""
    what = f"sinfo node {record.get('name', '?')}"
    gpu_type, num_gpus = parse_gres_gpus(_field(record, "gres", what))
    _, used = parse_gres_gpus(record.get("gres_used"))
    return SlurmNode(
        name=str(_field(record, "name", what)),
        partitions=tuple(_field(record, "partitions", what) or ()),
        state=str(_field(record, "state", what)).lower(),
        cpus=int(_field(record, "cpus", what)),
        alloc_cpus=int(record.get("alloc_cpus") or 0),
        memory_mib=float(record.get("real_memory") or math.inf),
        gpu_type=gpu_type,
        num_gpus=num_gpus,
        used_gpus=used,
    )


def parse_sinfo_json(text: str) -> list[SlurmNode]:
    """Every node of ``sinfo --json``'s output."""
    payload = _load(text, "sinfo --json")
    return [parse_node(record) for record in _field(payload, "nodes", "sinfo --json")]
