"""Mean and spread of repeated runs, and which differences between arms count as gains.

Why: one run of a live Slurm is not a measurement. Start times are whole seconds, scheduling
passes run on timers, and the machine is shared, so repeating an arm moves its makespan by
seconds (issue 18 saw 159-163 s for one arm, as wide as a claimed 4.9 % gain). Each arm is run
several times; a difference between two arms is called a gain (or a loss) only when their ranges
over the runs do not overlap, i.e. every run of one beat every run of the other; otherwise it is
"within spread".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The metrics of section 5.6 (Figs. 18-19) and whether lower is better.
METRICS: dict[str, bool] = {"makespan_s": True, "mean_wait_s": True, "gpu_utilisation_pct": False}


@dataclass(frozen=True)
class Spread:
    """Summary of one metric over repeated runs.

    Attributes:
        mean: Mean over runs.
        std: Sample standard deviation (0 for one run).
        low: Smallest value.
        high: Largest value.
        runs: Number of runs.
    """

    mean: float
    std: float
    low: float
    high: float
    runs: int

    def overlaps(self, other: Spread) -> bool:
        """Whether the two ranges [low, high] share any value."""
        return self.low <= other.high and other.low <= self.high


def spread_of(values: Sequence[float]) -> Spread:
    """Mean, sample std, min and max of ``values`` (NaN values, from runs where no job started,
    are left out)."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=np.float64)
    if finite.size == 0:
        return Spread(math.nan, math.nan, math.nan, math.nan, 0)
    std = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
    return Spread(float(finite.mean()), std, float(finite.min()), float(finite.max()), finite.size)


@dataclass(frozen=True)
class Comparison:
    """One arm against a baseline on one metric.

    Attributes:
        arm: The arm compared.
        baseline: The arm compared against.
        mode: ``live`` or ``simulated``.
        metric: One of :data:`METRICS`.
        change: Relative change of the mean in % (times), or points (utilisation).
        verdict: ``gain``, ``loss`` or ``within spread`` (ranges overlap).
    """

    arm: str
    baseline: str
    mode: str
    metric: str
    change: float
    verdict: str


def compare(
    arm: str, ours: Spread, baseline: str, theirs: Spread, metric: str, mode: str = "live"
) -> Comparison:
    """The change of ``ours`` against ``theirs`` and whether it exceeds the spread."""
    if metric == "gpu_utilisation_pct":
        change = ours.mean - theirs.mean
    else:
        change = 100.0 * (ours.mean - theirs.mean) / theirs.mean if theirs.mean else math.nan
    if ours.runs == 0 or theirs.runs == 0 or ours.overlaps(theirs):
        verdict = "within spread"
    else:
        better = (ours.mean < theirs.mean) == METRICS[metric]
        verdict = "gain" if better else "loss"
    return Comparison(arm, baseline, mode, metric, change, verdict)
