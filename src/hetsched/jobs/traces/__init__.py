"""The jobs: the job table, trace loaders for every supported format, synthetic traces,
requested-time models and the sample traces shipped with the package.

Every format loads to one :class:`~hetsched.jobs.traces.job_table.JobTable`;
``load_trace(path, format)`` dispatches by format name (``auto`` guesses from the file name), and
:func:`~hetsched.jobs.traces.source.load_jobs` is what commands call (a file, a sample or a
synthetic profile).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hetsched.core.errors import DataError
from hetsched.core.registry import Registry
from hetsched.jobs.traces.alibaba2020 import load_alibaba2020
from hetsched.jobs.traces.alibaba2023 import load_alibaba2023
from hetsched.jobs.traces.common import LoadReport, Trace
from hetsched.jobs.traces.helios import load_helios
from hetsched.jobs.traces.philly import load_philly
from hetsched.jobs.traces.rltune_csv import load_rltune_csv
from hetsched.jobs.traces.swf import load_swf

__all__ = ["TRACE_FORMATS", "LoadReport", "Trace", "detect_format", "load_trace"]

TRACE_FORMATS: Registry[Callable[..., Trace]] = Registry("trace format")
for _name, _loader in (
    ("swf", load_swf),
    ("rltune", load_rltune_csv),
    ("helios", load_helios),
    ("philly", load_philly),
    ("alibaba2020", load_alibaba2020),
    ("alibaba2023", load_alibaba2023),
):
    TRACE_FORMATS.register(_name)(_loader)


def detect_format(path: str | Path) -> str:
    """Guesses the format from the file name.

    Raises:
        DataError: When the name matches no known format.
    """
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".swf"):
        return "swf"
    if name.startswith("openb_pod_list"):
        return "alibaba2023"
    if name.startswith("pai_") or (path.is_dir() and (path / "pai_job_table.csv").is_file()):
        return "alibaba2020"
    if "cluster_log" in name and name.endswith(".csv"):
        return "helios"
    if name.endswith(".json"):
        return "philly"
    if name.endswith(".csv"):
        return "rltune"
    raise DataError(
        f"cannot tell the trace format from the name; pass one of {TRACE_FORMATS.names()}",
        path=str(path),
    )


def load_trace(
    path: str | Path,
    format: str = "auto",
    skip_bad_rows: bool = False,
    fix_negative_run_time: bool = False,
) -> Trace:
    """Loads ``path`` in ``format`` (``auto`` = :func:`detect_format`).

    ``fix_negative_run_time`` (SWF only) keeps a job with a negative run time at 10 s, as
    RLScheduler does, instead of excluding it.

    Raises:
        DataError: For an unreadable trace, or ``fix_negative_run_time`` with another format.
    """
    name = detect_format(path) if format == "auto" else format
    loader = TRACE_FORMATS.get(name)
    if not fix_negative_run_time:
        return loader(path, skip_bad_rows=skip_bad_rows)
    if name != "swf":
        raise DataError(
            f"the negative run-time fix-up is for SWF traces (RLScheduler's), not {name}",
            path=str(path),
        )
    return load_swf(path, skip_bad_rows=skip_bad_rows, fix_negative_run_time=True)
