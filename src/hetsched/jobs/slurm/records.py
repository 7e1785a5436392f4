"""Typed views of what Slurm 22.05 prints: ``squeue --json`` jobs and ``sinfo --json`` nodes.

Only the fields the adapter needs are kept, each converted to the units used everywhere else
(seconds, whole GPUs). Everything printed is untrusted (see :mod:`.json_fields`): output that is
not JSON, or JSON whose top level Slurm marks as failed, fails the whole read with a
:class:`~hetsched.core.errors.DataError`; a single record with a missing or malformed field is
skipped and reported with its reason, so one odd job can neither crash nor stall the loop.

The squeue records can be filtered by partition and user on their raw fields
(:func:`select_job_records`) before anything else of them is parsed, so jobs outside the
adapter's scope cost nothing and cannot fail the parse.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from hetsched.core.errors import DataError
from hetsched.jobs.slurm.json_fields import (
    SLURM_INFINITE,
    SLURM_NO_VAL,
    required,
    text,
    text_list,
    unix_time_s,
    whole_number,
)
from hetsched.jobs.slurm.requested_comment import read_requested_comment

#: Job states in which a job still waits for resources (``squeue``'s ``job_state``).
PENDING_STATES = frozenset({"PENDING"})
#: Job states in which a job holds resources.
RUNNING_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"})
#: Most GPUs one gres item may name (anything above is not a GPU count).
MAX_GPUS_PER_ITEM = 1024
#: Longest comment searched for the requested-time marker (Slurm's own limit is larger; the
#: marker of :mod:`.workload` is short and comes first).
MAX_COMMENT_CHARS = 65_536


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
        requested_time_s: The requested time the policy sees: the time limit, or the comment's
            bounded ``hetsched:requested_s=`` claim when the reader trusts comments (see
            :mod:`.requested_comment`).
        num_gpus: GPUs per node times nodes (from ``tres_per_node`` ``gres:gpu[:type]:k``).
        cpus: CPUs requested.
        num_nodes: Nodes requested or allocated.
        shared: ``shared`` as printed: None (OverSubscribe=OK), "none" (NO), "shared" (YES),
            "user", "mcs".
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


@dataclass
class ParsedJobs:
    """The jobs of one ``squeue`` read, and what was left out of it.

    Attributes:
        jobs: Records that parsed, in the order printed.
        skipped: Record label (``job N`` or ``record #i``) -> why it was skipped.
        bad_comments: Job id -> why its requested-time comment was ignored (only when comments
            are trusted at all).
    """

    jobs: list[SlurmJob] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    bad_comments: dict[int, str] = field(default_factory=dict)


@dataclass
class ParsedNodes:
    """The nodes of one ``sinfo`` read, and the node records skipped (label -> reason)."""

    nodes: list[SlurmNode] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def load_records(text_out: str, source: str, key: str) -> list[Any]:
    """The ``key`` list of a JSON object printed by ``source``.

    Raises:
        DataError: Not JSON, not an object, Slurm reported errors, or no such list.
    """
    try:
        payload = json.loads(text_out)
    except (json.JSONDecodeError, RecursionError) as error:
        raise DataError(f"{source} printed invalid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise DataError(f"{source} printed JSON that is not an object")
    errors = payload.get("errors") or []
    if errors:
        raise DataError(f"{source} reported errors: {str(errors)[:300]}")
    records = required(payload, key, source)
    if not isinstance(records, list):
        raise DataError(f"{source}: {key!r} is not a list", field=key)
    return records


def parse_gres_gpus(gres: Any, name: str = "gres") -> tuple[str, int]:
    """(GPU type, count) from a gres string such as ``gpu:4``, ``gpu:a100:2(IDX:0-1)`` or
    ``gres:gpu:2``; ("gpu", 0) when it lists no GPU.

    Raises:
        DataError: If it is not a string or the GPU count is not a sane whole number.
    """
    value = text(gres, name, "gres string")
    for item in re.split(r",(?![^(]*\))", value):
        parts = re.sub(r"\(.*\)$", "", item.strip()).split(":")
        if parts and parts[0] == "gres":
            parts = parts[1:]
        if not parts or parts[0] != "gpu":
            continue
        count = parts[-1] if len(parts) > 1 else "1"
        if not (count.isascii() and count.isdigit()) or int(count) > MAX_GPUS_PER_ITEM:
            raise DataError(f"bad GPU count in gres {value[:80]!r}", field=name)
        return (parts[1] if len(parts) == 3 else "gpu"), int(count)
    return "gpu", 0


def select_job_records(records: list[Any], partition: str | None, user: str | None) -> list[Any]:
    """The raw records in the partition/user filter, read from those two fields only.

    A record whose partition or user is not a string cannot match an active filter; with no
    filter every record is kept (and a malformed one is skipped later, by the parse).
    """
    chosen = []
    for record in records:
        if partition is not None or user is not None:
            if not isinstance(record, dict):
                continue
            raw_partition, raw_user = record.get("partition"), record.get("user_name")
            if partition is not None and (
                not isinstance(raw_partition, str) or partition not in raw_partition.split(",")
            ):
                continue
            if user is not None and raw_user != user:
                continue
        chosen.append(record)
    return chosen


def _time_limit_s(minutes: Any, what: str) -> float:
    if minutes is None:
        return math.inf
    value = whole_number(minutes, "time_limit", what, 0, SLURM_INFINITE)
    return math.inf if value in (0, SLURM_NO_VAL, SLURM_INFINITE) else 60.0 * value


def parse_job(record: Any, trust_requested_comment: bool = False) -> tuple[SlurmJob, str | None]:
    """One element of ``squeue --json``'s ``jobs`` list, and why its comment was ignored (None
    when it was accepted, absent, or comments are not trusted).

    Raises:
        DataError: Naming the first missing or malformed field.
    """
    if not isinstance(record, dict):
        raise DataError(f"squeue record is not an object ({type(record).__name__})")
    job_id = whole_number(required(record, "job_id", "squeue job"), "job_id", "squeue job", 1)
    what = f"squeue job {job_id}"
    time_limit_s = _time_limit_s(required(record, "time_limit", what), what)
    nodes = whole_number(required(record, "node_count", what) or 1, "node_count", what, 1)
    _, per_node = parse_gres_gpus(required(record, "tres_per_node", what), "tres_per_node")
    _, per_job = parse_gres_gpus(record.get("tres_per_job"), "tres_per_job")
    requested_s, problem = time_limit_s, None
    if trust_requested_comment:
        comment = text(record.get("comment"), "comment", what, MAX_COMMENT_CHARS)
        reading = read_requested_comment(comment, time_limit_s)
        problem = reading.problem
        if reading.requested_s is not None:
            requested_s = reading.requested_s
    shared = record.get("shared")
    job = SlurmJob(
        job_id=job_id,
        name=text(record.get("name"), "name", what),
        user=text(required(record, "user_name", what), "user_name", what),
        partition=text(required(record, "partition", what), "partition", what),
        state=text(required(record, "job_state", what), "job_state", what),
        priority=whole_number(required(record, "priority", what) or 0, "priority", what),
        submit_time_s=unix_time_s(required(record, "submit_time", what), "submit_time", what),
        start_time_s=unix_time_s(required(record, "start_time", what) or 0, "start_time", what),
        end_time_s=unix_time_s(required(record, "end_time", what) or 0, "end_time", what),
        time_limit_s=time_limit_s,
        requested_time_s=requested_s,
        num_gpus=per_job or per_node * nodes,
        cpus=whole_number(required(record, "cpus", what) or 1, "cpus", what),
        num_nodes=nodes,
        shared=None if shared is None else text(shared, "shared", what, 32),
    )
    return job, problem


def _label(record: Any, index: int, noun: str, key: str) -> str:
    value = record.get(key) if isinstance(record, dict) else None
    if isinstance(value, int | str) and not isinstance(value, bool) and len(str(value)) <= 64:
        return f"{noun} {value}"
    return f"record #{index}"


def parse_jobs(records: list[Any], trust_requested_comment: bool = False) -> ParsedJobs:
    """Every job record that parses; the others are skipped with their reasons."""
    parsed = ParsedJobs()
    for index, record in enumerate(records):
        try:
            job, problem = parse_job(record, trust_requested_comment)
        except DataError as error:
            parsed.skipped[_label(record, index, "job", "job_id")] = str(error)
            continue
        parsed.jobs.append(job)
        if problem is not None:
            parsed.bad_comments[job.job_id] = problem
    return parsed


def parse_node(record: Any) -> SlurmNode:
    """One element of ``sinfo --json``'s ``nodes`` list.

    Raises:
        DataError: Naming the first missing or malformed field.
    """
    if not isinstance(record, dict):
        raise DataError(f"sinfo record is not an object ({type(record).__name__})")
    what = "sinfo node"
    name = text(required(record, "name", what), "name", what)
    what = f"sinfo node {name}"
    gpu_type, num_gpus = parse_gres_gpus(required(record, "gres", what))
    _, used = parse_gres_gpus(record.get("gres_used"), "gres_used")
    memory = record.get("real_memory")
    return SlurmNode(
        name=name,
        partitions=text_list(required(record, "partitions", what), "partitions", what),
        state=text(required(record, "state", what), "state", what).lower(),
        cpus=whole_number(required(record, "cpus", what), "cpus", what),
        alloc_cpus=whole_number(record.get("alloc_cpus") or 0, "alloc_cpus", what),
        memory_mib=math.inf if not memory else float(whole_number(memory, "real_memory", what)),
        gpu_type=gpu_type,
        num_gpus=num_gpus,
        used_gpus=used,
    )


def parse_nodes(records: list[Any]) -> ParsedNodes:
    """Every node record that parses; the others are skipped with their reasons."""
    parsed = ParsedNodes()
    for index, record in enumerate(records):
        try:
            parsed.nodes.append(parse_node(record))
        except DataError as error:
            parsed.skipped[_label(record, index, "node", "name")] = str(error)
    return parsed


def highest_pending_priority(records: list[Any]) -> tuple[int, str] | None:
    """(priority, label) of the highest-priority pending record, reading only ``job_state``,
    ``priority`` and ``job_id``; records where those are malformed are passed over."""
    best: tuple[int, str] | None = None
    for index, record in enumerate(records):
        if not isinstance(record, dict) or record.get("job_state") not in PENDING_STATES:
            continue
        try:
            priority = whole_number(record.get("priority"), "priority", "squeue job")
        except DataError:
            continue
        if best is None or priority > best[0]:
            best = (priority, _label(record, index, "job", "job_id"))
    return best
