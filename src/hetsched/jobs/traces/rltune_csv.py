"""RLTune's 19-column CSV (no header, ``-1`` = missing), the format of its Philly/Helios/Alibaba
files and of ``rltune_synthetic_trace.csv``.

Columns: 0 job_id, 1 submit_time s, 2 wait_time, 3 run_time s, 4 num_gpus, 5 cpu_time,
6 used_memory, 7 request_cpus, 8 request_time, 9 request_memory, 10 status, 11 user_id,
12 group_id, 13 executable, 14 queue, 15 partition, 16 preceding_job, 17 vc_id, 18 gpu_type
(0 T4, 1 MISC, 2 P100, 3 V100_16GB, 4 V100_32GB). The GPU type becomes a one-type constraint;
request_memory is read as MiB.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from hetsched.jobs.traces.common import RowReader, Trace, numbered_lines
from hetsched.jobs.traces.job_table import Job, JobTable

RLTUNE_GPU_TYPES: tuple[str, ...] = ("T4", "MISC", "P100", "V100_16GB", "V100_32GB")
RLTUNE_COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "wait_time",
    "run_time",
    "num_gpus",
    "cpu_time",
    "used_memory",
    "request_cpus",
    "request_time",
    "request_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "vc_id",
    "gpu_type",
)
_MISSING = ("-1", "")


def load_rltune_csv(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads an RLTune 19-column CSV."""
    path = Path(path)
    reader = RowReader(path, "rltune", skip_bad_rows)
    lines = ((n, line) for n, line in numbered_lines(path) if line.strip())
    for line_no, line in lines:
        cols = next(csv.reader([line]))

        def parse(cols: list[str] = cols, line_no: int = line_no) -> Job:
            if len(cols) != len(RLTUNE_COLUMNS):
                raise reader.error(f"expected 19 columns, got {len(cols)}", line_no)
            field = dict(zip(RLTUNE_COLUMNS, (c.strip() for c in cols), strict=True))
            num, opt = reader.number, reader.optional
            gpu_code = opt(field["gpu_type"], line_no, "gpu_type", _MISSING)
            gpu_types = None
            if not math.isnan(gpu_code):
                if int(gpu_code) not in range(len(RLTUNE_GPU_TYPES)):
                    raise reader.error(f"unknown GPU type code {gpu_code:g}", line_no, "gpu_type")
                gpu_types = frozenset([RLTUNE_GPU_TYPES[int(gpu_code)]])
            requested = opt(field["request_time"], line_no, "request_time", _MISSING)
            vc = field["vc_id"]
            cpus = opt(field["request_cpus"], line_no, "request_cpus", _MISSING)
            memory = opt(field["request_memory"], line_no, "request_memory", _MISSING)
            return Job(
                id=field["job_id"],
                submit_time_s=num(field["submit_time"], line_no, "submit_time", minimum=0),
                run_time_s=num(field["run_time"], line_no, "run_time", minimum=0),
                num_gpus=int(num(field["num_gpus"], line_no, "num_gpus", minimum=0)),
                requested_time_s=requested if requested > 0 else math.nan,
                user=field["user_id"],
                group=field["group_id"],
                virtual_cluster=None if vc in _MISSING else vc,
                gpu_types=gpu_types,
                cpus=0.0 if math.isnan(cpus) else cpus,
                memory_mib=0.0 if math.isnan(memory) else memory,
                status=field["status"],
                qos=field["queue"] if field["queue"] not in _MISSING else "",
            )

        reader.add(line_no, parse)
    return reader.finish()


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "-1"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def write_rltune_csv(jobs: JobTable, path: str | Path) -> None:
    """Writes ``jobs`` in RLTune's 19-column format (what :func:`load_rltune_csv` reads back).

    A GPU-type constraint is written as its code only when it is exactly one of RLTune's five
    types; anything else is written as ``-1`` (any type).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        for job in jobs.to_jobs():
            types = sorted(job.gpu_types) if job.gpu_types else []
            code = (
                RLTUNE_GPU_TYPES.index(types[0])
                if len(types) == 1 and types[0] in (RLTUNE_GPU_TYPES)
                else None
            )
            row = [job.id, job.submit_time_s, None, job.run_time_s, job.num_gpus, None, None]
            row += [job.cpus or None, job.requested_time_s, job.memory_mib or None, job.status]
            row += [job.user, job.group, None, job.qos, None, None, job.virtual_cluster, code]
            writer.writerow([_cell(v) for v in row])
