"""Alibaba PAI 2020 (``pai_job_table.csv`` + ``pai_task_table.csv``, no header lines).

- job table: ``job_name, inst_id, user, status, start_time, end_time`` (seconds);
- task table: ``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem,
  plan_gpu, gpu_type`` — ``plan_cpu`` 100 = 1 core, ``plan_mem`` in GB, ``plan_gpu`` per instance
  with 100 = 1 GPU (a share below 100 occupies one whole GPU here).

A job's GPUs = sum over its tasks of ``inst_num x ceil(plan_gpu / 100)``; its CPUs and memory
likewise; its allowed GPU types = the task types other than ``MISC``/empty (none = any). Submit
time = the job's ``start_time`` (PAI logs submission there); run time = last task end - first
task start. Jobs still running or without tasks are excluded and counted.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from hetsched.core.errors import DataError
from hetsched.jobs.traces.common import RowReader, Trace, rebase
from hetsched.jobs.traces.job_table import Job

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
_STATUS = {"Terminated": "completed", "Failed": "failed", "Running": "running"}


@dataclass
class _TaskTotals:
    gpus: int = 0
    cpus: float = 0.0
    memory_mib: float = 0.0
    first_start_s: float = math.inf
    last_end_s: float = -math.inf
    gpu_types: set[str] = field(default_factory=set)


def _rows(path: Path, columns: tuple[str, ...]):
    if not path.is_file():
        raise DataError("trace file not found", path=str(path))
    with path.open(newline="") as handle:
        for line_no, cols in enumerate(csv.reader(handle), start=1):
            if not cols or (line_no == 1 and cols[0] == columns[0]):
                continue
            yield line_no, cols


def load_alibaba2020(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads PAI 2020 from a folder holding both tables, or from ``pai_job_table.csv`` with
    ``pai_task_table.csv`` beside it."""
    path = Path(path)
    job_path = path / "pai_job_table.csv" if path.is_dir() else path
    task_path = job_path.with_name("pai_task_table.csv")
    task_reader = RowReader(task_path, "alibaba2020", skip_bad_rows)
    totals: dict[str, _TaskTotals] = {}
    for line_no, cols in _rows(task_path, TASK_COLUMNS):

        def parse_task(cols: list[str] = cols, n: int = line_no) -> None:
            if len(cols) != len(TASK_COLUMNS):
                raise task_reader.error(f"expected {len(TASK_COLUMNS)} columns", n)
            f = dict(zip(TASK_COLUMNS, (c.strip() for c in cols), strict=True))
            inst = task_reader.number(f["inst_num"], n, "inst_num", minimum=0)
            opt = task_reader.optional
            plan_gpu = opt(f["plan_gpu"], n, "plan_gpu", ("",))
            plan_cpu = opt(f["plan_cpu"], n, "plan_cpu", ("",))
            plan_mem = opt(f["plan_mem"], n, "plan_mem", ("",))
            start = opt(f["start_time"], n, "start_time", ("",))
            end = opt(f["end_time"], n, "end_time", ("",))
            t = totals.setdefault(f["job_name"], _TaskTotals())
            if not math.isnan(plan_gpu) and plan_gpu > 0:
                t.gpus += int(inst) * math.ceil(plan_gpu / 100.0)
            t.cpus += 0.0 if math.isnan(plan_cpu) else inst * plan_cpu / 100.0
            t.memory_mib += 0.0 if math.isnan(plan_mem) else inst * plan_mem * 1024.0
            if not math.isnan(start):
                t.first_start_s = min(t.first_start_s, start)
            if not math.isnan(end):
                t.last_end_s = max(t.last_end_s, end)
            if f["gpu_type"] and f["gpu_type"] != "MISC":
                t.gpu_types.add(f["gpu_type"])

        task_reader.add(line_no, parse_task)
    reader = RowReader(job_path, "alibaba2020", skip_bad_rows)
    reader.report.skipped += task_reader.report.skipped
    for line_no, cols in _rows(job_path, JOB_COLUMNS):

        def parse(cols: list[str] = cols, n: int = line_no) -> Job | None:
            if len(cols) != len(JOB_COLUMNS):
                raise reader.error(f"expected {len(JOB_COLUMNS)} columns", n)
            f = dict(zip(JOB_COLUMNS, (c.strip() for c in cols), strict=True))
            t = totals.get(f["job_name"])
            if t is None:
                reader.exclude("no tasks")
                return None
            if not math.isfinite(t.first_start_s) or not math.isfinite(t.last_end_s):
                reader.exclude("not finished")
                return None
            submit = reader.number(f["start_time"], n, "start_time", minimum=0)
            return Job(
                id=f["job_name"],
                submit_time_s=min(submit, t.first_start_s),
                run_time_s=max(t.last_end_s - t.first_start_s, 0.0),
                num_gpus=t.gpus,
                requested_time_s=math.nan,
                user=f["user"],
                gpu_types=frozenset(t.gpu_types) if t.gpu_types else None,
                cpus=t.cpus,
                memory_mib=t.memory_mib,
                status=_STATUS.get(f["status"], f["status"].lower()),
            )

        reader.add(line_no, parse)
    return rebase(reader.finish())
