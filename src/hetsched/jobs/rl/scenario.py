"""What RL training and evaluation run on: a trace, a cluster slice and the 90 %/10 % time split.

The paper trains on "a representative cluster slice chosen to maintain realistic contention"
(section 4.2): :func:`~hetsched.jobs.cluster.slicing.slice_cluster` keeps a stratified fraction of
the nodes, and ``arrival_compression`` makes arrivals denser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.catalog import resolve_cluster
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.cluster.slicing import slice_cluster
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import JobTable
from hetsched.jobs.traces.source import load_jobs
from hetsched.jobs.traces.transforms import compress_arrivals


def split_by_time(jobs: JobTable, train_fraction: float = 0.9) -> tuple[JobTable, JobTable]:
    """The first ``train_fraction`` of the jobs by submission time, and the rest (section 3.1.1:
    90 % for training, 10 % held out). Neither part is rebased; windows rebase themselves."""
    if not 0 < train_fraction < 1:
        raise HetschedError(f"train fraction must be in (0, 1), got {train_fraction}")
    cut = round(train_fraction * len(jobs))
    if cut < 1 or cut >= len(jobs):
        raise HetschedError(f"a {train_fraction:.0%} split of {len(jobs)} jobs leaves a part empty")
    return jobs.take(np.arange(cut)), jobs.take(np.arange(cut, len(jobs)))


@dataclass
class Scenario:
    """A trace with its requested times filled, the cluster it runs on, and its time split."""

    name: str
    jobs: JobTable
    cluster: Cluster
    train: JobTable
    test: JobTable


def load_scenario(
    trace: Path | None,
    trace_format: str = "auto",
    synthetic: str | None = None,
    synthetic_jobs: int = 4096,
    cluster: str | None = None,
    cluster_fraction: float = 1.0,
    estimate: str = "auto",
    train_fraction: float = 0.9,
    seed: int = 0,
    arrival_compression: float = 1.0,
) -> Scenario:
    """Loads a trace file (or draws a synthetic one), resolves its cluster, slices the cluster,
    divides submit times by ``arrival_compression`` (a load knob: 2 = arrivals twice as dense),
    fills requested times with the ``estimate`` model and splits by time.

    Raises:
        HetschedError: For a bad combination of options or an unreadable trace.
    """
    loaded = load_jobs(trace, trace_format, synthetic, synthetic_jobs, seed)
    jobs = loaded.jobs
    the_cluster = resolve_cluster(cluster, loaded.cluster, loaded.default_cluster)
    the_cluster = slice_cluster(the_cluster, cluster_fraction)
    jobs = compress_arrivals(jobs, arrival_compression)
    jobs = fill_requested_times(jobs, estimate, seed)
    train, test = split_by_time(jobs, train_fraction)
    return Scenario(loaded.name, jobs, the_cluster, train, test)
