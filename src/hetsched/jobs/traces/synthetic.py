"""Seeded synthetic traces whose arrivals, run times and GPU counts follow the paper's statistics.

Per profile (Philly, Helios, Alibaba):
- arrivals: Poisson at the month-normalised rate of Table 2 (jobs/s), times ``arrival_scale``;
- run times: log-normal (sigma 2.0, the heavy tail of DL job durations) with the mean of Table 2,
  capped at the maximum of Table 4 (60, 50 and 30 days);
- GPU counts: powers of two with mostly single-GPU jobs (the shape reported by the Philly, Helios
  and PAI analyses; the exact mix per profile is our approximation, see ``PROFILES``);
- users: as many as Table 4 lists, Zipf-like activity (a few users submit most jobs);
- Helios jobs carry one of VC1-VC5 (weighted by VC size); a third of Alibaba jobs constrain the
  GPU type to one of its five types.
No requested time is generated (real GPU traces have none): an estimate model fills it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetsched.core.registry import Registry
from hetsched.core.seeding import make_rng
from hetsched.jobs.traces.job_table import FIELD_NAMES, REQUESTED_MISSING, JobTable


@dataclass(frozen=True)
class TraceProfile:
    """Published statistics of one trace (Tables 2 and 4)."""

    name: str
    arrival_rate_per_s: float
    mean_run_s: float
    max_run_s: float
    users: int
    gpu_counts: tuple[int, ...]
    gpu_count_probs: tuple[float, ...]
    virtual_clusters: tuple[tuple[str, float], ...] = ()
    gpu_types: tuple[tuple[str, float], ...] = ()
    typed_fraction: float = 0.0
    cluster: str = ""


PROFILES: Registry[TraceProfile] = Registry("synthetic profile")
DAY_S = 86400.0

for _profile in (
    TraceProfile(
        "philly", 0.022333, 26299.2, 60 * DAY_S, 319,
        (1, 2, 4, 8, 16, 32), (0.70, 0.10, 0.10, 0.07, 0.02, 0.01), cluster="philly",
    ),
    TraceProfile(
        "helios", 0.032919, 2481.4, 50 * DAY_S, 277,
        (1, 2, 4, 8, 16, 32), (0.55, 0.12, 0.10, 0.15, 0.05, 0.03),
        virtual_clusters=(("vc1", 16), ("vc2", 12), ("vc3", 10), ("vc4", 8), ("vc5", 8)),
        cluster="helios",
    ),
    TraceProfile(
        "alibaba", 0.077136, 5466.3, 30 * DAY_S, 1242,
        (1, 2, 4, 8), (0.85, 0.07, 0.04, 0.04),
        gpu_types=(("V100_16GB", 3), ("V100_32GB", 1.5), ("P100", 2), ("T4", 2), ("MISC", 1.5)),
        typed_fraction=1 / 3, cluster="alibaba",
    ),
):  # fmt: skip
    PROFILES.register(_profile.name)(_profile)

LOGNORMAL_SIGMA = 2.0


def _weighted_choice(rng: np.random.Generator, items: tuple[tuple[str, float], ...], n: int):
    names = [name for name, _ in items]
    weights = np.array([w for _, w in items], dtype=float)
    return rng.choice(names, size=n, p=weights / weights.sum())


def generate(
    profile: str | TraceProfile, num_jobs: int, seed: int = 0, arrival_scale: float = 1.0
) -> JobTable:
    """``num_jobs`` jobs drawn from ``profile`` (a name in :data:`PROFILES` or a profile)."""
    if num_jobs < 1:
        raise ValueError(f"num_jobs must be >= 1, got {num_jobs}")
    p = PROFILES.get(profile) if isinstance(profile, str) else profile
    rng = make_rng(seed)
    gaps = rng.exponential(1.0 / (p.arrival_rate_per_s * arrival_scale), size=num_jobs)
    submit = np.cumsum(gaps) - gaps[0]
    mu = math.log(p.mean_run_s) - LOGNORMAL_SIGMA**2 / 2
    run = np.clip(np.round(rng.lognormal(mu, LOGNORMAL_SIGMA, size=num_jobs)), 1.0, p.max_run_s)
    gpus = rng.choice(p.gpu_counts, size=num_jobs, p=np.array(p.gpu_count_probs))
    ranks = np.arange(1, p.users + 1, dtype=float)
    user = rng.choice(p.users, size=num_jobs, p=(1 / ranks) / (1 / ranks).sum())
    vcs = _weighted_choice(rng, p.virtual_clusters, num_jobs) if p.virtual_clusters else None
    types = None
    if p.gpu_types:
        chosen = _weighted_choice(rng, p.gpu_types, num_jobs)
        typed = rng.random(num_jobs) < p.typed_fraction
        types = [frozenset([t]) if k else None for t, k in zip(chosen, typed, strict=True)]
    columns = {
        "id": [f"{p.name}-{i}" for i in range(num_jobs)],
        "submit_time_s": submit,
        "run_time_s": run,
        "num_gpus": gpus,
        "requested_time_s": np.full(num_jobs, np.nan),
        "user": [f"u{u}" for u in user],
        "group": [""] * num_jobs,
        "virtual_cluster": list(vcs) if vcs is not None else [None] * num_jobs,
        "gpu_types": types if types is not None else [None] * num_jobs,
        "cpus": gpus * 4.0,
        "memory_mib": gpus * 16384.0,
        "status": ["completed"] * num_jobs,
        "qos": [""] * num_jobs,
        "requested_source": [REQUESTED_MISSING] * num_jobs,
    }
    assert set(columns) == set(FIELD_NAMES)
    return JobTable(columns)
