"""Standard Workload Format (Parallel Workloads Archive): 18 whitespace-separated columns.

Columns (1-based): 1 job id, 2 submit, 3 wait, 4 run time, 5 allocated processors, 6 avg CPU time,
7 used memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status, 12 user,
13 group, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time; ``-1`` = missing.

Mapping: processors become ``num_gpus`` (slots of a homogeneous pool; see
:func:`hetsched.jobs.cluster.homogeneous_pool`), requested processors first and allocated ones
when the request is missing; the requested time stays NaN when missing (an estimate model fills
it). The header's ``MaxProcs``/``MaxNodes`` gives the trace's cluster (a pool of that many
slots). Jobs with a zero run time, a negative run time or no processors are excluded and counted
per reason. RLScheduler (``job.py``) keeps a job whose run time is negative with a run time of
10 s; ``fix_negative_run_time`` does the same (:data:`RLSCHEDULER_NEGATIVE_RUN_TIME_S`). A row with
other than 18 columns is malformed (an error naming the line, or skipped with ``skip_bad_rows``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetsched.jobs.cluster.catalog import homogeneous_pool
from hetsched.jobs.traces.common import RowReader, Trace, numbered_lines
from hetsched.jobs.traces.job_table import Job, JobTable

_STATUS = {"0": "failed", "1": "completed", "5": "cancelled"}
SWF_COLUMNS = 18
#: The run time RLScheduler gives a job whose logged run time is negative.
RLSCHEDULER_NEGATIVE_RUN_TIME_S = 10.0
#: Load-report reasons for the rows left out.
ZERO_RUN_TIME = "zero run time"
NEGATIVE_RUN_TIME = "negative run time (kept as 10 s by --fix-negative-runtime)"
NO_PROCESSORS = "no processors"


def load_swf(
    path: str | Path, skip_bad_rows: bool = False, fix_negative_run_time: bool = False
) -> Trace:
    """Loads an SWF file; with ``fix_negative_run_time`` a negative run time becomes
    :data:`RLSCHEDULER_NEGATIVE_RUN_TIME_S` (RLScheduler's fix-up) instead of excluding the job."""
    path = Path(path)
    reader = RowReader(path, "swf", skip_bad_rows)
    machine_size = 0
    for line_no, line in numbered_lines(path):
        text = line.strip()
        if text.startswith(";"):
            key, _, value = text[1:].partition(":")
            if key.strip() in ("MaxProcs", "MaxNodes") and value.strip().isdigit():
                machine_size = max(machine_size, int(value))
            continue
        if not text:
            continue

        def parse(text: str = text, line_no: int = line_no) -> Job | None:
            cols = text.split()
            if len(cols) != SWF_COLUMNS:
                raise reader.error(f"expected {SWF_COLUMNS} columns, got {len(cols)}", line_no)
            num = reader.number
            run = num(cols[3], line_no, "run_time")
            requested_procs = num(cols[7], line_no, "requested_processors")
            procs = requested_procs if requested_procs > 0 else num(cols[4], line_no, "processors")
            if run < 0 and fix_negative_run_time:
                run = RLSCHEDULER_NEGATIVE_RUN_TIME_S
            reason = _exclusion(run, procs)
            if reason is not None:
                reader.exclude(reason)
                return None
            requested = reader.optional(cols[8], line_no, "requested_time", ("-1",))
            memory_kb = reader.optional(cols[9], line_no, "requested_memory", ("-1",))
            return Job(
                id=cols[0],
                submit_time_s=num(cols[1], line_no, "submit_time", minimum=0),
                run_time_s=run,
                num_gpus=int(procs),
                requested_time_s=requested if requested > 0 else float("nan"),
                user=cols[11],
                group=cols[12],
                memory_mib=0.0 if memory_kb != memory_kb else memory_kb * procs / 1024.0,
                status=_STATUS.get(cols[10], cols[10]),
                qos=cols[14],
            )

        reader.add(line_no, parse)
    return reader.finish(homogeneous_pool(machine_size) if machine_size > 0 else None)


def _exclusion(run_time_s: float, processors: float) -> str | None:
    """Why a row is left out (None: it is kept)."""
    if run_time_s < 0:
        return NEGATIVE_RUN_TIME
    if run_time_s == 0:
        return ZERO_RUN_TIME
    if processors <= 0:
        return NO_PROCESSORS
    return None


def write_swf(jobs: JobTable, path: str | Path, max_procs: int) -> None:
    """Writes ``jobs`` as SWF (what :func:`load_swf` reads back): ``num_gpus`` as processors,
    a missing requested time as ``-1``, and a ``MaxProcs`` header giving the machine size."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    users = {name: code for code, name in enumerate(dict.fromkeys(jobs.user.tolist()), start=1)}
    requested = np.where(np.isnan(jobs.requested_time_s), -1, np.round(jobs.requested_time_s))
    with path.open("w") as handle:
        handle.write(f"; Version: 2.2\n; MaxProcs: {max_procs}\n; MaxNodes: {max_procs}\n")
        for i in range(len(jobs)):
            procs = int(jobs.num_gpus[i])
            handle.write(
                f"{i + 1} {jobs.submit_time_s[i]:.0f} -1 {jobs.run_time_s[i]:.0f} {procs} -1 -1"
                f" {procs} {requested[i]:.0f} -1 1 {users[jobs.user[i]]} 1 -1 1 -1 -1 -1\n"
            )
