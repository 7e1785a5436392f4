"""Seeded synthetic HPC traces shaped like a production machine's log, at production scale.

Why: the simulator's cost has to be measured on what real HPC logs look like, and the real ones
(RICC-2010-2 from the Parallel Workloads Archive: 447,784 jobs on 1,024 nodes x 8 cores) are not
shipped here. :data:`RICC_LIKE` approximates that log's shape from its published description:

- many small jobs: about half serial, most of the rest one node (8 cores) or less, a few percent
  spanning tens to thousands of cores (node multiples, powers of two);
- many short jobs: log-normal run times with a median of a few minutes and a tail to 72 hours;
- bulk submissions: a user submits a burst of similar jobs within seconds (parameter sweeps,
  job arrays), so the waiting queue periodically holds thousands of small jobs — what makes a
  backfilling scheduler's queue scans expensive;
- a day/night cycle in submissions and a Zipf-like user population;
- requested times rounded up to the time limits users pick (1, 2, 6, 12, 24, 72 h), or run time
  times a small factor for careful users.

The offered load (core-seconds asked for over core-seconds available) is set exactly by
stretching the arrival times, so a trace of any length keeps the same pressure on the machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.seeding import make_rng
from hetsched.jobs.traces.job_table import FIELD_NAMES, REQUESTED_FROM_TRACE, JobTable

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class HpcProfile:
    """The statistics a synthetic HPC trace is drawn from.

    Attributes:
        name: Label of the profile (job ids start with it).
        cores: Processors of the machine.
        cores_per_node: Processors per node (parallel jobs ask for node multiples).
        offered_load: Core-seconds requested by all jobs over the machine's core-seconds across
            the trace's span.
        serial_share: Share of one-core jobs.
        small_share: Share of 2 .. ``cores_per_node`` core jobs (powers of two).
        large_max_cores: Largest parallel job, cores.
        median_run_s: Median run time.
        run_sigma: Log-normal sigma of the run time (the tail's weight).
        max_run_s: Longest run time (the machine's wall-time limit).
        mean_burst_jobs: Mean jobs per bulk submission (geometric).
        users: Number of users (Zipf-like activity).
        time_limits_s: The time limits users request (rounded up to the next one).
        careful_share: Share of jobs whose request is the run time times 1..2 instead.
        night_rate_factor: Submission rate at night relative to the daily mean.
    """

    name: str = "ricc-like"
    cores: int = 8192
    cores_per_node: int = 8
    offered_load: float = 0.65
    serial_share: float = 0.45
    small_share: float = 0.35
    large_max_cores: int = 8192
    median_run_s: float = 480.0
    run_sigma: float = 2.2
    max_run_s: float = 72 * HOUR_S
    mean_burst_jobs: float = 8.0
    users: int = 176
    time_limits_s: tuple[float, ...] = (
        HOUR_S,
        2 * HOUR_S,
        6 * HOUR_S,
        12 * HOUR_S,
        DAY_S,
        3 * DAY_S,
    )
    careful_share: float = 0.2
    night_rate_factor: float = 0.4


#: Shaped like RICC-2010-2 (RIKEN Integrated Cluster of Clusters, 8,192 cores, 176 users): at
#: 447,784 jobs it spans about 150 days (the log covers May to September 2010), 45 % of the jobs
#: are serial and 80 % fit one node, while the 3 % above 64 cores carry most of the core-hours.
RICC_LIKE = HpcProfile()


def generate_hpc_trace(num_jobs: int, seed: int = 0, profile: HpcProfile = RICC_LIKE) -> JobTable:
    """``num_jobs`` jobs drawn from ``profile`` with ``seed`` (same seed, same trace).

    Jobs of one bulk submission share a user, a size and a typical run time; bursts arrive as a
    Poisson process whose rate follows a day/night cycle; the span is then set so the offered
    load is ``profile.offered_load``.

    Raises:
        HetschedError: For fewer than one job or a profile whose shares exceed 1.
    """
    if num_jobs < 1:
        raise HetschedError(f"the number of jobs must be >= 1, got {num_jobs}")
    if profile.serial_share + profile.small_share > 1:
        raise HetschedError("serial_share + small_share must be <= 1")
    rng = make_rng(seed)
    burst_of = _bursts(rng, num_jobs, profile.mean_burst_jobs)
    bursts = int(burst_of[-1]) + 1
    # Per burst: user, size, typical run time; per job: spread around the burst's run time.
    ranks = np.arange(1, profile.users + 1, dtype=float)
    burst_user = rng.choice(profile.users, size=bursts, p=(1 / ranks) / (1 / ranks).sum())
    burst_cores = _sizes(rng, bursts, profile)
    median_log = math.log(profile.median_run_s)
    burst_log_run = rng.normal(median_log, profile.run_sigma * 0.9, size=bursts)
    job_log_run = burst_log_run[burst_of] + rng.normal(0, profile.run_sigma * 0.3, size=num_jobs)
    run = np.clip(np.round(np.exp(job_log_run)), 1.0, profile.max_run_s)
    cores = burst_cores[burst_of]
    requested = _requests(rng, run, profile)
    submit = _arrivals(rng, burst_of, bursts, run, cores, profile)
    columns = {
        "id": [f"{profile.name}-{i + 1}" for i in range(num_jobs)],
        "submit_time_s": submit,
        "run_time_s": run,
        "num_gpus": cores,
        "requested_time_s": requested,
        "user": [f"u{u}" for u in burst_user[burst_of]],
        "group": [""] * num_jobs,
        "virtual_cluster": [None] * num_jobs,
        "gpu_types": [None] * num_jobs,
        "cpus": np.zeros(num_jobs),
        "memory_mib": np.zeros(num_jobs),
        "status": ["completed"] * num_jobs,
        "qos": [""] * num_jobs,
        "requested_source": [REQUESTED_FROM_TRACE] * num_jobs,
    }
    assert set(columns) == set(FIELD_NAMES)
    return JobTable(columns)


def _bursts(rng: np.random.Generator, num_jobs: int, mean_jobs: float) -> np.ndarray:
    """The burst index of every job (bursts of geometric size, mean ``mean_jobs``)."""
    sizes = rng.geometric(1.0 / mean_jobs, size=num_jobs)  # enough bursts for any draw
    ends = np.cumsum(sizes)
    count = int(np.searchsorted(ends, num_jobs)) + 1
    return np.repeat(np.arange(count), sizes[:count])[:num_jobs]


def _sizes(rng: np.random.Generator, count: int, p: HpcProfile) -> np.ndarray:
    """Cores per burst: serial, small (powers of two up to a node) or node multiples."""
    kind = rng.random(count)
    per_node_exp = int(math.log2(p.cores_per_node))
    small = 2 ** rng.integers(1, per_node_exp + 1, size=count)
    # Large: a power of two of nodes, log-uniform from 2 nodes to the largest job.
    max_exp = int(math.log2(p.large_max_cores))
    large = 2 ** rng.integers(per_node_exp + 1, max_exp + 1, size=count)
    # Log-uniform exponents would make huge jobs as common as medium ones; weight by 1/exponent.
    big = rng.random(count) < 1.0 / (large / p.cores_per_node) ** 0.35
    large = np.where(big, large, 2 * p.cores_per_node)
    cores = np.where(
        kind < p.serial_share, 1, np.where(kind < p.serial_share + p.small_share, small, large)
    )
    return np.minimum(cores, p.cores).astype(np.int64)


def _requests(rng: np.random.Generator, run: np.ndarray, p: HpcProfile) -> np.ndarray:
    """Requested times: the next time limit at or above the run time, or run x U(1, 2)."""
    limits = np.array(p.time_limits_s)
    rounded = limits[np.minimum(np.searchsorted(limits, run), len(limits) - 1)]
    careful = rng.random(len(run)) < p.careful_share
    tight = np.ceil(run * rng.uniform(1.0, 2.0, size=len(run)))
    return np.maximum(np.where(careful, tight, rounded), run)


def _arrivals(
    rng: np.random.Generator,
    burst_of: np.ndarray,
    bursts: int,
    run: np.ndarray,
    cores: np.ndarray,
    p: HpcProfile,
) -> np.ndarray:
    """Submit times: bursts as a day/night-modulated Poisson process, jobs of a burst a few
    seconds apart, the whole span scaled to the offered load."""
    work_core_s = float(np.sum(run * cores))
    span_s = work_core_s / (p.cores * p.offered_load)
    # Thinning-free day/night cycle: draw unit-rate gaps, then map through the inverse of the
    # cumulative rate (mean 1 per day; night at ``night_rate_factor``).
    unit = np.cumsum(rng.exponential(1.0, size=bursts))
    unit *= span_s / unit[-1]
    grid = np.linspace(0.0, span_s, 4096)
    rate = 1.0 + (1.0 - p.night_rate_factor) * np.sin(2 * np.pi * grid / DAY_S)
    cumulative = np.concatenate(([0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(grid))))
    cumulative *= span_s / cumulative[-1]
    burst_start = np.interp(unit, cumulative, grid)
    burst_start -= burst_start[0]
    # Within a burst, jobs follow each other by 0-5 s (a submit loop).
    within = rng.integers(0, 6, size=len(burst_of)).astype(float)
    first = np.r_[True, burst_of[1:] != burst_of[:-1]]
    within[first] = 0.0
    offset = np.cumsum(within) - np.repeat(np.cumsum(within)[first], np.bincount(burst_of))
    return np.round(burst_start[burst_of] + offset)
