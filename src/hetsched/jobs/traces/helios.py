"""Helios (SenseTime, SC'21) ``cluster_log.csv``: one row per job, with a header.

Columns used (by name): ``job_id, user, vc, gpu_num, cpu_num, state, submit_time`` and either
``duration`` (seconds) or ``start_time``/``end_time``; times are ``YYYY-MM-DD HH:MM:SS``. Helios
logs no requested time (an estimate model fills it) and no GPU type (each VC is homogeneous).
Jobs with no start (never ran) are excluded and counted.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from hetsched.jobs.traces.common import RowReader, Trace, rebase
from hetsched.jobs.traces.job_table import Job

_REQUIRED = ("job_id", "user", "vc", "gpu_num", "cpu_num", "state", "submit_time")
_STATE = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled"}


def load_helios(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads a Helios ``cluster_log.csv``."""
    path = Path(path)
    reader = RowReader(path, "helios", skip_bad_rows)
    if not path.is_file():
        raise reader.error("trace file not found", None)
    with path.open(newline="") as handle:
        rows = csv.DictReader(handle)
        header = rows.fieldnames or []
        absent = [c for c in _REQUIRED if c not in header]
        has_duration = "duration" in header
        if not has_duration and not {"start_time", "end_time"} <= set(header):
            absent.append("duration (or start_time and end_time)")
        if absent:
            raise reader.error(f"missing columns {absent}", 1)
        for line_no, row in enumerate(rows, start=2):

            def parse(row: dict = row, line_no: int = line_no) -> Job | None:
                if None in row or any(v is None for v in row.values()):
                    raise reader.error("wrong number of columns", line_no)
                start = (row.get("start_time") or "").strip()
                if not has_duration and not start:
                    reader.exclude("never started")
                    return None
                submit = reader.timestamp(row["submit_time"], line_no, "submit_time")
                if has_duration:
                    run = reader.number(row["duration"], line_no, "duration", minimum=0)
                else:
                    end = reader.timestamp(row["end_time"], line_no, "end_time")
                    run = end - reader.timestamp(start, line_no, "start_time")
                    if run < 0:
                        raise reader.error("end_time before start_time", line_no, "end_time")
                return Job(
                    id=row["job_id"].strip(),
                    submit_time_s=submit,
                    run_time_s=run,
                    num_gpus=int(reader.number(row["gpu_num"], line_no, "gpu_num", minimum=0)),
                    requested_time_s=math.nan,
                    user=row["user"].strip(),
                    virtual_cluster=row["vc"].strip() or None,
                    cpus=reader.number(row["cpu_num"], line_no, "cpu_num", minimum=0),
                    status=_STATE.get(row["state"].strip(), row["state"].strip().lower()),
                )

            reader.add(line_no, parse)
    return rebase(reader.finish())
