"""Where a command's job table comes from: a trace file in any supported format, a sample trace
shipped with the package (``sample:NAME``), or a seeded synthetic profile.

Every command that reads jobs (``simulate``, ``trace-info``, ``train``, ``evaluate``, the Slurm
workload) goes through :func:`load_jobs`, so they accept the same inputs and fail with the same
one-line errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.traces import detect_format, load_trace
from hetsched.jobs.traces.job_table import JobTable
from hetsched.jobs.traces.samples import resolve_trace
from hetsched.jobs.traces.synthetic import PROFILES, generate

#: The built-in cluster a trace format runs on when ``--cluster`` is not given and the trace
#: defines none (an SWF header and Alibaba 2023's node list do define one).
DEFAULT_CLUSTER_BY_FORMAT: dict[str, str] = {
    "rltune": "rltune-synthetic",
    "helios": "helios",
    "philly": "philly",
    "alibaba2020": "alibaba",
}


@dataclass(frozen=True)
class LoadedJobs:
    """A job table and what is known about where it came from.

    Attributes:
        jobs: The job table (requested times not yet filled).
        cluster: The cluster the trace defines (Alibaba 2023's node list, an SWF pool), else None.
        format: The trace format (``synthetic`` for a synthetic profile).
        report: The loader's report (rows read, skipped, excluded) or the synthetic settings.
        name: A label for tables and titles.
        default_cluster: The built-in cluster to run on when none is chosen and ``cluster`` is
            None (the synthetic profile's, or the format's in ``DEFAULT_CLUSTER_BY_FORMAT``).
        notes: What the loader left out, one line per reason, for commands to print (a trace's
            rows excluded on purpose and malformed rows skipped; empty for a synthetic trace).
    """

    jobs: JobTable
    cluster: Cluster | None
    format: str
    report: dict[str, object]
    name: str
    default_cluster: str | None
    notes: tuple[str, ...] = ()


def load_jobs(
    trace: str | Path | None,
    trace_format: str = "auto",
    synthetic: str | None = None,
    synthetic_jobs: int = 2048,
    seed: int = 0,
    skip_bad_rows: bool = False,
    fix_negative_run_time: bool = False,
) -> LoadedJobs:
    """Loads ``trace`` (a file, or ``sample:NAME``) in ``trace_format`` (``auto`` guesses from the
    name), or draws ``synthetic_jobs`` jobs of the ``synthetic`` profile with ``seed``.
    ``fix_negative_run_time``: see :func:`~hetsched.jobs.traces.load_trace`.

    Raises:
        HetschedError: When both or neither of ``trace`` and ``synthetic`` are given, the sample
            name is unknown (the message lists the samples), or the trace cannot be read (the
            message names the file, line and field).
    """
    if (trace is None) == (synthetic is None):
        raise HetschedError("give exactly one of --trace or --synthetic")
    if synthetic is not None:
        profile = PROFILES.get(synthetic)
        table = generate(profile, synthetic_jobs, seed=seed)
        settings: dict[str, object] = {"synthetic": synthetic, "jobs": synthetic_jobs, "seed": seed}
        label = f"synthetic {synthetic}"
        return LoadedJobs(table, None, "synthetic", settings, label, profile.cluster)
    assert trace is not None  # exactly one of the two is set (checked above)
    path = resolve_trace(trace)
    name = detect_format(path) if trace_format == "auto" else trace_format
    loaded = load_trace(path, name, skip_bad_rows, fix_negative_run_time)
    report = loaded.report.as_dict()
    default = DEFAULT_CLUSTER_BY_FORMAT.get(name)
    label = str(trace) if str(trace) != str(path) else path.name
    notes = tuple(loaded.report.notes())
    return LoadedJobs(loaded.jobs, loaded.cluster, name, report, label, default, notes)
