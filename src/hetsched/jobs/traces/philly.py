"""Microsoft Philly ``cluster_job_log`` (JSON list of jobs).

Each job: ``jobid``, ``user``, ``vc``, ``status`` (Pass / Killed / Failed), ``submitted_time``
and ``attempts``, each attempt with ``start_time``, ``end_time`` and ``detail`` = list of
``{"ip": node, "gpus": [...]}``. The job's GPUs are those of its last attempt; its run time spans
the first attempt's start to the last attempt's end (retries included, as the Philly analysis
does). Jobs without a finished attempt (no attempt, or a null / "None" time) are excluded and
counted. No requested time is logged.
Line numbers in errors are the job's position (1-based) in the list.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hetsched.core.errors import DataError
from hetsched.jobs.traces.common import RowReader, Trace, rebase
from hetsched.jobs.traces.job_table import Job

_STATUS = {"Pass": "completed", "Killed": "killed", "Failed": "failed"}


def load_philly(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads a Philly ``cluster_job_log`` JSON file."""
    path = Path(path)
    reader = RowReader(path, "philly", skip_bad_rows)
    if not path.is_file():
        raise reader.error("trace file not found", None)
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise DataError(f"not valid JSON: {error.msg}", path=str(path), line=error.lineno) from None
    if not isinstance(entries, list):
        raise reader.error("expected a JSON list of jobs", None)
    for position, entry in enumerate(entries, start=1):

        def parse(entry: object = entry, n: int = position) -> Job | None:
            if not isinstance(entry, dict):
                raise reader.error("job entry is not an object", n)
            for key in ("jobid", "submitted_time", "attempts"):
                if key not in entry:
                    raise reader.error("missing field", n, key)
            attempts = entry["attempts"]
            if not isinstance(attempts, list):
                raise reader.error("not a list", n, "attempts")
            finished = [
                a
                for a in attempts
                if isinstance(a, dict)
                and str(a.get("start_time") or "None") != "None"
                and str(a.get("end_time") or "None") != "None"
            ]
            if not finished:
                reader.exclude("no finished attempt")
                return None
            submit = reader.timestamp(str(entry["submitted_time"]), n, "submitted_time")
            start = reader.timestamp(str(finished[0]["start_time"]), n, "attempts.start_time")
            end = reader.timestamp(str(finished[-1]["end_time"]), n, "attempts.end_time")
            if end < start:
                raise reader.error("end_time before start_time", n, "attempts.end_time")
            detail = finished[-1].get("detail") or []
            try:
                gpus = sum(len(d["gpus"]) for d in detail)
            except (TypeError, KeyError):
                raise reader.error("detail must list {ip, gpus}", n, "attempts.detail") from None
            return Job(
                id=str(entry["jobid"]),
                submit_time_s=submit,
                run_time_s=end - start,
                num_gpus=gpus,
                requested_time_s=math.nan,
                user=str(entry.get("user", "")),
                virtual_cluster=str(entry["vc"]) if entry.get("vc") else None,
                status=_STATUS.get(str(entry.get("status")), str(entry.get("status")).lower()),
            )

        reader.add(position, parse)
    return rebase(reader.finish())
