"""Standard Workload Format (Parallel Workloads Archive): 18 whitespace-separated columns.

Columns (1-based): 1 job id, 2 submit, 3 wait, 4 run time, 5 allocated processors, 6 avg CPU time,
7 used memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status, 12 user,
13 group, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time; ``-1`` = missing.

Mapping: processors become ``num_gpus`` (slots of a homogeneous pool; see
:func:`hetsched.jobs.cluster.homogeneous_pool`), requested processors first and allocated ones
when the request is missing; the requested time stays NaN when missing (an estimate model fills
it). The header's ``MaxProcs``/``MaxNodes`` gives the trace's cluster (a pool of that many
slots). Jobs with a non-positive run time or size are excluded and counted, as RLScheduler does.
"""

from __future__ import annotations

from pathlib import Path

from hetsched.jobs.cluster.catalog import homogeneous_pool
from hetsched.jobs.traces.common import RowReader, Trace, numbered_lines
from hetsched.jobs.traces.job_table import Job

_STATUS = {"0": "failed", "1": "completed", "5": "cancelled"}


def load_swf(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads an SWF file."""
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
            if len(cols) < 18:
                raise reader.error(f"expected 18 columns, got {len(cols)}", line_no)
            num = reader.number
            run = num(cols[3], line_no, "run_time")
            requested_procs = num(cols[7], line_no, "requested_processors")
            procs = requested_procs if requested_procs > 0 else num(cols[4], line_no, "processors")
            if run <= 0 or procs <= 0:
                reader.exclude("non-positive run time or processors")
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
