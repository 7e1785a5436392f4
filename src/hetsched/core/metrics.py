"""Metric summaries: mean, standard deviation and the tail percentiles every paper reports, and
the mean with its 95 % confidence interval over replicates (seeds, windows)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Summary statistics of a sample (population standard deviation, linear-interpolated
    percentiles as ``numpy.percentile`` computes them)."""

    count: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p99: float
    max: float

    def as_dict(self) -> dict[str, float]:
        """The summary as a plain dict, for JSON/CSV output."""
        return asdict(self)


def summarize(values: Iterable[float]) -> Summary:
    """Summarises ``values``; an empty sample gives count 0 and NaN statistics.

    NaN rather than 0 for an empty sample, so that a run that completed nothing cannot be mistaken
    for a perfect one in a results table.
    """
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if arr.size == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, nan, nan)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return Summary(
        count=int(arr.size),
        mean=float(arr.mean()),
        std=float(arr.std()),
        min=float(arr.min()),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        max=float(arr.max()),
    )


def mean_and_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and 95 % confidence half-width over replicates (Student's t; NaN with one value)."""
    from scipy.stats import t  # optional dependency (the jobs extra); imported when used

    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        return float(data.mean()), math.nan
    half = float(t.ppf(0.975, len(data) - 1) * data.std(ddof=1) / math.sqrt(len(data)))
    return float(data.mean()), half
