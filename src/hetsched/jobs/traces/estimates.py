"""Requested-time (runtime estimate) models for jobs whose trace has no time limit.

Schedulers see the user's requested time, not the true run time. Many GPU traces (Philly, Helios,
Alibaba) carry no request, and RLTune's simulator then silently used the true run time. Here the
gap is filled by an explicit, seeded model, and each job records which model filled it
(``Job.requested_source``):

- ``trace``: keep the trace's value; jobs without one are an error;
- ``user-history`` (default for ``auto``): Tsafrir-style — the longest run time among the same
  user's two previous jobs in submission order, times a safety margin, rounded up to a
  "user-like" limit (minutes, then hours); the user's first job falls back to ``noisy``. It is
  computed offline, so a previous job's run time counts as known even if, in the replay, that
  job is still running (an optimistic simplification; the job's own run time is never used);
- ``noisy``: the true run time times a log-uniform over-estimate factor in [1, max_factor],
  rounded up like a user would (a stand-in for user requests, which are mostly over-estimates);
- ``oracle``: the true run time (explicitly asked for; e.g. to match RLScheduler's setting).

``auto`` keeps trace values where present and uses ``user-history`` for the rest.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.seeding import make_rng
from hetsched.jobs.traces.job_table import REQUESTED_FROM_TRACE, JobTable

ESTIMATE_MODELS: tuple[str, ...] = ("auto", "trace", "user-history", "noisy", "oracle")


def _round_like_a_user(seconds: np.ndarray) -> np.ndarray:
    """Rounds up to 5 minutes below 1 h, to whole hours above (how users write time limits)."""
    minutes5 = np.ceil(seconds / 300.0) * 300.0
    hours = np.ceil(seconds / 3600.0) * 3600.0
    return np.where(seconds <= 3600.0, minutes5, hours)


def noisy_estimates(run_time_s: np.ndarray, seed: int, max_factor: float = 5.0) -> np.ndarray:
    """True run time x a log-uniform factor in [1, max_factor], rounded up like a user would."""
    rng = make_rng(seed)
    factor = np.exp(rng.uniform(0.0, math.log(max_factor), size=len(run_time_s)))
    return _round_like_a_user(np.maximum(run_time_s, 1.0) * factor)


def user_history_estimates(
    jobs: JobTable, seed: int, margin: float = 1.5, max_factor: float = 5.0
) -> np.ndarray:
    """Per job, ``margin`` x the longest run time of the user's two previous jobs (in submission
    order), rounded up; jobs with no earlier job of the same user use :func:`noisy_estimates`."""
    fallback = noisy_estimates(jobs.run_time_s, seed, max_factor)
    out = fallback.copy()
    recent: dict[str, list[float]] = defaultdict(list)
    users, runs = jobs.user.tolist(), jobs.run_time_s.tolist()
    for i, (user, run) in enumerate(zip(users, runs, strict=True)):
        previous = recent[user]
        if previous:
            out[i] = _round_like_a_user(np.array([margin * max(previous)]))[0]
        previous.append(run)
        if len(previous) > 2:
            previous.pop(0)
    return out


def fill_requested_times(jobs: JobTable, model: str = "auto", seed: int = 0) -> JobTable:
    """Returns ``jobs`` with every ``requested_time_s`` filled by ``model`` (see module doc).

    Raises:
        HetschedError: For an unknown model, or ``trace`` when some job has no requested time.
    """
    if model not in ESTIMATE_MODELS:
        raise HetschedError(
            f"unknown estimate model {model!r}; known: {', '.join(ESTIMATE_MODELS)}"
        )
    requested = jobs.requested_time_s.copy()
    source = jobs.requested_source.copy()
    missing = np.isnan(requested)
    if model == "trace":
        if missing.any():
            raise HetschedError(
                f"{int(missing.sum())} jobs have no requested time in the trace (first:"
                f" {jobs.id[missing][0]}); choose an estimate model"
            )
        return jobs
    if model == "oracle":
        requested[:] = jobs.run_time_s
        source[:] = "oracle"
    else:
        fill = missing if model == "auto" else np.ones(len(jobs), dtype=bool)
        kind = "user-history" if model == "auto" else model
        values = (
            noisy_estimates(jobs.run_time_s, seed)
            if kind == "noisy"
            else user_history_estimates(jobs, seed)
        )
        requested[fill] = values[fill]
        source[fill] = kind
        source[~fill & ~missing] = REQUESTED_FROM_TRACE
    return jobs.with_columns(requested_time_s=requested, requested_source=source)
