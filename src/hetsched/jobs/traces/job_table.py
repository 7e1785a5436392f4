"""The normalised job table every RLTune trace loader produces and the simulator consumes.

Why columnar: the simulator scores the whole waiting queue at every scheduling pass (a policy is a
vectorised function of the queued jobs' submit time, requested time, GPUs, ...). Holding each field
as one NumPy array lets a pass gather a queue of thousands of jobs with one fancy-index per field
instead of touching thousands of Python objects, which is what makes a 10,000-job EASY simulation
run in seconds. :class:`Job` is the row view for loaders, tests and people; :class:`JobTable` is the
column store with conversions both ways.

Units: times in seconds (``*_s``), memory in MiB, CPUs in cores, GPUs as whole devices. A GPU
share (Alibaba ``gpu_milli`` < 1000, PAI ``plan_gpu`` < 100) occupies one whole GPU here: GPU
sharing is not simulated, and rounding up is the conservative choice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

#: Requested-time sources recorded per job, so no result silently rests on the true runtime.
REQUESTED_FROM_TRACE = "trace"
REQUESTED_MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a trace, normalised.

    Attributes:
        id: The trace's job id (string, unique within a table).
        user: User name or id as a string ("" if the trace has none).
        group: Group / team ("" if none).
        virtual_cluster: Virtual cluster or partition the job must run in (None = any node).
        submit_time_s: Submission time, seconds from the trace's origin.
        run_time_s: Real run time on a reference-speed GPU (speed factor 1.0), seconds.
        requested_time_s: The user's time limit / runtime estimate; NaN when the trace has none
            (the simulator then needs an estimate model, see :mod:`hetsched.jobs.estimates`).
        num_gpus: Whole GPUs requested (0 for CPU-only jobs).
        gpu_types: Allowed GPU types, or None when any type will do.
        cpus: CPU cores requested in total (0 = unconstrained / unknown).
        memory_mib: Memory requested in total, MiB (0 = unconstrained / unknown).
        status: Final status in the trace ("completed", "failed", "killed", ...).
        qos: Quality-of-service class ("" if none); Slurm multifactor's QoS factor reads it.
        requested_source: Where ``requested_time_s`` came from ("trace", "missing" or the name
            of the estimate model that filled it).
    """

    id: str
    submit_time_s: float
    run_time_s: float
    num_gpus: int
    requested_time_s: float = math.nan
    user: str = ""
    group: str = ""
    virtual_cluster: str | None = None
    gpu_types: frozenset[str] | None = None
    cpus: float = 0.0
    memory_mib: float = 0.0
    status: str = "completed"
    qos: str = ""
    requested_source: str = REQUESTED_MISSING

    def __post_init__(self) -> None:
        if self.gpu_types is not None and not isinstance(self.gpu_types, frozenset):
            object.__setattr__(self, "gpu_types", frozenset(self.gpu_types))
        if self.requested_source == REQUESTED_MISSING and not math.isnan(self.requested_time_s):
            object.__setattr__(self, "requested_source", REQUESTED_FROM_TRACE)


_FLOAT_FIELDS = ("submit_time_s", "run_time_s", "requested_time_s", "cpus", "memory_mib")
_OBJECT_FIELDS = (
    "id",
    "user",
    "group",
    "virtual_cluster",
    "gpu_types",
    "status",
    "qos",
    "requested_source",
)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Job))


class JobTable:
    """Column store of jobs: one NumPy array per :class:`Job` field, sorted by submit time.

    Numeric columns are float64 (``num_gpus`` int64); text and set columns are object arrays.
    Rows are sorted by (submit time, original order) on construction so the simulator can release
    arrivals in index order.

    Args:
        columns: Field name -> array-like, every :class:`Job` field present and of equal length.
    """

    def __init__(self, columns: dict[str, Any]) -> None:
        missing = [name for name in FIELD_NAMES if name not in columns]
        if missing:
            raise ValueError(f"job table is missing columns {missing}")
        n = len(columns["id"])
        cols: dict[str, np.ndarray] = {}
        for name in FIELD_NAMES:
            values = columns[name]
            if name in _FLOAT_FIELDS:
                arr = np.asarray(values, dtype=np.float64)
            elif name == "num_gpus":
                arr = np.asarray(values, dtype=np.int64)
            else:
                arr = np.empty(n, dtype=object)
                arr[:] = list(values)
            if arr.shape != (n,):
                raise ValueError(f"column {name!r} has shape {arr.shape}, expected ({n},)")
            cols[name] = arr
        order = np.argsort(cols["submit_time_s"], kind="stable")
        if not np.array_equal(order, np.arange(n)):
            cols = {name: arr[order] for name, arr in cols.items()}
        self._cols = cols

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_jobs(cls, jobs: Iterable[Job]) -> JobTable:
        """Builds a table from row records."""
        rows = list(jobs)
        return cls({name: [getattr(job, name) for job in rows] for name in FIELD_NAMES})

    def to_jobs(self) -> list[Job]:
        """Row records, in table order."""
        return [self.job(i) for i in range(len(self))]

    def job(self, index: int) -> Job:
        """Row ``index`` as a :class:`Job`."""
        values = {}
        for name in FIELD_NAMES:
            value = self._cols[name][index]
            if name in _FLOAT_FIELDS:
                value = float(value)
            elif name == "num_gpus":
                value = int(value)
            values[name] = value
        return Job(**values)

    # -- column access -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cols["id"])

    def column(self, name: str) -> np.ndarray:
        """The array of field ``name`` (read it, do not write it)."""
        return self._cols[name]

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__.get("_cols")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    def take(self, indices: Sequence[int] | np.ndarray) -> JobTable:
        """A new table with rows ``indices`` (in submit order)."""
        idx = np.asarray(indices, dtype=np.int64)
        return JobTable({name: arr[idx] for name, arr in self._cols.items()})

    def window(self, start: int, size: int, rebase: bool = True) -> JobTable:
        """``size`` consecutive jobs from row ``start``.

        With ``rebase`` the first job submits at t = 0, as a window replayed on an empty cluster
        (RLScheduler's evaluation protocol).
        """
        if start < 0 or size <= 0 or start + size > len(self):
            raise ValueError(f"window [{start}, {start + size}) is outside 0..{len(self)}")
        table = self.take(np.arange(start, start + size))
        if rebase:
            table = table.with_columns(submit_time_s=table.submit_time_s - table.submit_time_s[0])
        return table

    def with_columns(self, **updates: Any) -> JobTable:
        """A copy with some columns replaced."""
        cols = dict(self._cols)
        cols.update(updates)
        return JobTable(cols)

    def user_codes(self) -> tuple[np.ndarray, list[str]]:
        """Integer code per row and the list of distinct users (code -> name)."""
        names, codes = np.unique(self._cols["user"].astype(str), return_inverse=True)
        return codes.astype(np.int64), [str(n) for n in names]

    def gpu_type_names(self) -> list[str]:
        """Every GPU type named in any job's constraint, sorted."""
        seen: set[str] = set()
        for types in self._cols["gpu_types"]:
            if types:
                seen.update(types)
        return sorted(seen)

    def __repr__(self) -> str:
        return f"JobTable({len(self)} jobs)"
