"""Shared machinery of the trace loaders: field parsing with precise errors, and the load report.

A malformed row raises :class:`~hetsched.core.errors.DataError` naming the file, the 1-based line
and the field; with ``skip_bad_rows`` the row is skipped and counted in :class:`LoadReport`
instead. Rows a loader leaves out on purpose (e.g. a pod that was never scheduled, so it has no
run time) are counted per reason in ``LoadReport.excluded``: nothing disappears silently.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hetsched.core.errors import DataError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.traces.job_table import Job, JobTable


@dataclass
class LoadReport:
    """What a loader read, skipped and excluded."""

    path: str
    format: str
    rows: int = 0
    skipped: list[DataError] = field(default_factory=list)
    excluded: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        """For JSON and the ``trace-info`` table."""
        return {
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "skipped_bad_rows": len(self.skipped),
            "first_skipped": [str(e) for e in self.skipped[:5]],
            "excluded": dict(self.excluded),
        }

    def notes(self) -> list[str]:
        """What was left out, one line per reason (most rows first), for the terminal."""
        lines = [
            f"excluded {count} of {self.rows} rows: {reason}"
            for reason, count in self.excluded.most_common()
        ]
        if self.skipped:
            first = self.skipped[0]
            lines.append(
                f"skipped {len(self.skipped)} of {self.rows} malformed rows (first: {first})"
            )
        return lines


@dataclass
class Trace:
    """A loaded trace: the job table, the load report and, when the trace defines one, a cluster."""

    jobs: JobTable
    report: LoadReport
    cluster: Cluster | None = None


class RowReader:
    """Parses rows one at a time, raising or collecting :class:`DataError`.

    Args:
        path: The file, for messages.
        format: The trace format name, for the report.
        skip_bad_rows: Collect bad rows in the report instead of raising.
    """

    def __init__(self, path: Path, format: str, skip_bad_rows: bool) -> None:
        self.path = path
        self.skip_bad_rows = skip_bad_rows
        self.report = LoadReport(str(path), format)
        self.jobs: list[Job] = []

    def error(self, message: str, line: int | None, field_name: str | None = None) -> DataError:
        """A DataError located in this file."""
        return DataError(message, path=str(self.path), line=line, field=field_name)

    def add(self, line: int, parse: Callable[[], Job | None]) -> None:
        """Runs ``parse`` for one row; a Job is kept, None means excluded (already counted)."""
        self.report.rows += 1
        try:
            job = parse()
        except DataError as error:
            if not self.skip_bad_rows:
                raise
            self.report.skipped.append(error)
            return
        if job is not None:
            self.jobs.append(job)

    def exclude(self, reason: str) -> None:
        """Counts a row left out on purpose."""
        self.report.excluded[reason] += 1

    def finish(self, cluster: Cluster | None = None) -> Trace:
        """The trace; raises if nothing usable was read."""
        if not self.jobs:
            raise DataError("no usable jobs in the file", path=str(self.path))
        ids = [job.id for job in self.jobs]
        if len(set(ids)) != len(ids):
            dup = next(i for i, c in Counter(ids).items() if c > 1)
            raise DataError(f"duplicate job id {dup!r}", path=str(self.path), field="id")
        return Trace(JobTable.from_jobs(self.jobs), self.report, cluster)

    # -- typed fields ----------------------------------------------------------------------------
    def number(self, value: str, line: int, name: str, minimum: float | None = None) -> float:
        """A finite float (``-1`` / empty are not handled here; see :meth:`optional`)."""
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise self.error(f"not a number: {value!r}", line, name) from None
        if not math.isfinite(out):
            raise self.error(f"not finite: {value!r}", line, name)
        if minimum is not None and out < minimum:
            raise self.error(f"must be >= {minimum}, got {value!r}", line, name)
        return out

    def optional(self, value: str, line: int, name: str, missing: tuple[str, ...]) -> float:
        """A float, or NaN when ``value`` is one of the ``missing`` markers."""
        if value is None or value.strip() in missing:
            return math.nan
        return self.number(value, line, name)

    def timestamp(self, value: str, line: int, name: str) -> float:
        """Seconds since the epoch from ``YYYY-MM-DD HH:MM:SS`` (naive, as the traces are)."""
        try:
            return datetime.strptime(value.strip(), "%Y-%m-%d %H:%M:%S").timestamp()
        except (AttributeError, ValueError):
            raise self.error(f"not a 'YYYY-MM-DD HH:MM:SS' time: {value!r}", line, name) from None


def rebase(trace: Trace) -> Trace:
    """Shifts submit times so the first job submits at 0 (absolute epochs are meaningless here)."""
    jobs = trace.jobs
    if len(jobs) and jobs.submit_time_s[0] != 0:
        jobs = jobs.with_columns(submit_time_s=jobs.submit_time_s - jobs.submit_time_s[0])
    return Trace(jobs, trace.report, trace.cluster)


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) pairs; a missing file is a DataError."""
    if not path.is_file():
        raise DataError("trace file not found", path=str(path))
    with path.open(encoding="utf-8", errors="replace") as handle:
        yield from enumerate(handle, start=1)
