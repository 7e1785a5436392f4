"""Scaled workloads for a real Slurm: a trace window becomes ``sbatch``-ed ``sleep`` jobs.

Section 5.6 ran 1,024 synthetic DL jobs over days; on one machine the same shape must fit in
minutes. :func:`scale_workload` keeps the trace's order of run times, GPU counts and arrivals and
changes only the time axis:

- run and requested times go through one monotone log-linear map from the window's run-time
  range onto ``[min_run_s, max_run_s]`` (short stays short, long stays long, the heavy tail is
  compressed instead of clipped, and every job's run/requested ratio keeps its direction);
- arrivals are stretched linearly onto ``[0, arrival_span_s]`` (0 = one batch at t = 0);
- GPU counts are clipped to ``[1, max_gpus]`` (one node's GPUs).

:func:`submit_workload` then submits each job at its arrival time: ``sleep`` of the scaled run
time, ``--gres=gpu:k``, a time limit covering the sleep and the requested time, and the scaled
requested time in the comment (Slurm keeps time limits in whole minutes, too coarse for jobs of
seconds; the adapter reads the comment only with ``--trust-requested-comment``, and only when it
lies in the limit's last minute, see :mod:`.requested_comment`, which holds for every job whose
run time is under a minute or not more than a minute above its requested time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import ConfigError
from hetsched.jobs.slurm.client import SlurmClient, SubmitRequest
from hetsched.jobs.traces.job_table import JobTable


@dataclass(frozen=True)
class WorkloadScale:
    """How a trace window is squeezed onto one small node.

    Attributes:
        min_run_s: Shortest job after scaling.
        max_run_s: Longest job after scaling.
        arrival_span_s: Last arrival after scaling (0 = all at once).
        max_gpus: Largest GPU count (one node's GPUs).
    """

    min_run_s: float = 1.0
    max_run_s: float = 12.0
    arrival_span_s: float = 20.0
    max_gpus: int = 4

    def __post_init__(self) -> None:
        if not 0 < self.min_run_s <= self.max_run_s:
            raise ConfigError(f"need 0 < min_run_s <= max_run_s, got {self}")
        if self.arrival_span_s < 0 or self.max_gpus < 1:
            raise ConfigError(f"need arrival_span_s >= 0 and max_gpus >= 1, got {self}")


def _log_map(values: np.ndarray, src_lo: float, src_hi: float, lo: float, hi: float) -> np.ndarray:
    """Monotone map of ``[src_lo, src_hi]`` onto ``[lo, hi]``, linear in log space, clipped."""
    if src_hi <= src_lo:
        return np.full(len(values), math.sqrt(lo * hi))
    position = (np.log(np.maximum(values, 1e-9)) - math.log(src_lo)) / math.log(src_hi / src_lo)
    return np.exp(math.log(lo) + np.clip(position, 0.0, 1.0) * math.log(hi / lo))


def scale_workload(jobs: JobTable, scale: WorkloadScale) -> JobTable:
    """The same jobs on the scaled time axis (see the module docstring); every job gets user
    ``root``, as the submitted jobs will have.

    Raises:
        ConfigError: If a requested time is missing (fill it with an estimate model first).
    """
    if np.isnan(jobs.requested_time_s).any():
        raise ConfigError("the workload needs requested times; fill them with an estimate model")
    runs = np.maximum(jobs.run_time_s, 1.0)
    lo, hi = float(runs.min()), float(runs.max())
    run_s = _log_map(runs, lo, hi, scale.min_run_s, scale.max_run_s)
    requested_s = _log_map(
        np.maximum(jobs.requested_time_s, 1.0), lo, hi, scale.min_run_s, scale.max_run_s
    )
    submit = jobs.submit_time_s - jobs.submit_time_s[0]
    span = float(submit[-1])
    arrivals = submit * (scale.arrival_span_s / span) if span > 0 else np.zeros(len(jobs))
    gpus = np.clip(jobs.num_gpus, 1, scale.max_gpus)
    n = len(jobs)
    return jobs.with_columns(
        submit_time_s=np.round(arrivals, 3),
        run_time_s=np.round(run_s, 3),
        requested_time_s=np.round(requested_s, 3),
        num_gpus=gpus,
        cpus=gpus.astype(np.float64),
        memory_mib=np.zeros(n),
        user=np.array(["root"] * n, dtype=object),
        virtual_cluster=np.array([None] * n, dtype=object),
        gpu_types=np.array([None] * n, dtype=object),
    )


def submit_requests(jobs: JobTable, partition: str | None = None) -> list[SubmitRequest]:
    """One ``sbatch`` request per job of a scaled table (the time limit covers the sleep plus a
    second, and the requested time, so the requested time lies within the limit's last minute
    whenever the run time does); every job is submitted with ``--oversubscribe`` so that the
    adapter's placement advice may act on it."""
    return [
        SubmitRequest(
            name=f"hs-{jobs.id[i]}",
            sleep_s=float(jobs.run_time_s[i]),
            num_gpus=int(jobs.num_gpus[i]),
            time_limit_s=max(float(jobs.run_time_s[i]) + 1.0, float(jobs.requested_time_s[i])),
            requested_time_s=float(jobs.requested_time_s[i]),
            partition=partition,
            oversubscribe=True,
        )
        for i in range(len(jobs))
    ]


def submit_workload(
    client: SlurmClient,
    jobs: JobTable,
    partition: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """Submits each job of a scaled table at its arrival time (relative to the call); returns
    the Slurm job ids in table order."""
    start = clock()
    ids = []
    for request, arrival_s in zip(
        submit_requests(jobs, partition), jobs.submit_time_s.tolist(), strict=True
    ):
        delay = start + arrival_s - clock()
        if delay > 0:
            sleep(delay)
        ids.append(client.submit(request))
    return ids
