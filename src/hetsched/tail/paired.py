"""Paired comparison of scorers over seeds: is one really better, or is it seed noise?

Every scorer of a benchmark seed sees the same pods and the same query noise, so the fair test of
"scorer A beats the baseline" is the per-seed difference A − baseline. This module gives its mean,
a percentile bootstrap interval (scipy's ``stats.bootstrap``) and the wins and losses. Five seeds
were not enough to tell the scorers apart in this project's first runs: the interval says so.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from hetsched.core.errors import DataError

CONFIDENCE = 0.95
RESAMPLES = 5000


def paired_difference(
    per_seed: list[dict],
    scorer: str,
    baseline: str,
    metric: str,
    seed: int = 0,
) -> dict[str, float | int]:
    """Mean of ``scorer − baseline`` over seeds for one metric, with a bootstrap interval.

    Args:
        per_seed: one dict per seed, holding ``{scorer: {metric: value}}`` for both scorers.
        scorer: the scorer compared.
        baseline: the scorer it is compared against.
        metric: the key of the per-seed value (e.g. ``"mean_avg_np90_s"``); lower is better.
        seed: seed of the bootstrap's resampling, so the interval is reproducible.

    Returns:
        ``mean``, ``low``, ``high`` (the 95 % interval; equal to the mean with fewer than 2
        seeds), ``wins`` (seeds where the scorer is lower), ``ties`` (equal: e.g. the same
        placement), ``losses`` and ``seeds``.
    """
    if not per_seed:
        raise DataError("a paired comparison needs at least one seed")
    diffs = np.array([r[scorer][metric] - r[baseline][metric] for r in per_seed], dtype=float)
    mean = float(diffs.mean())
    low = high = mean
    if len(diffs) > 1 and np.ptp(diffs) > 0:
        interval = stats.bootstrap(
            (diffs,),
            np.mean,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
    return {
        "mean": mean,
        "low": low,
        "high": high,
        "wins": int((diffs < 0).sum()),
        "ties": int((diffs == 0).sum()),
        "losses": int((diffs > 0).sum()),
        "seeds": len(diffs),
    }
