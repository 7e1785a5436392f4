"""Table III with grouped cross-validation: does the regressor predict cells and models unseen?

A random split of harness rows puts repeats of the same (model, node, threads, contention) cell
in both train and test, so a regressor that memorises cells scores the repeat noise, not its
generalisation (issue 16: RMSLE 0.094 random, 0.18-0.38 leave-cell-out). Three schemes, each a
set of folds whose held-out rows are predicted by a regressor fitted on the others:

- ``random``: k folds of shuffled rows (the paper's split, repeated k times);
- ``cell``: leave-cell-out, k folds of whole cells (:data:`~hetsched.tail.dataset.CELL_KEYS`);
- ``model``: leave-one-model-out, one fold per model: a model the regressor never saw.

Per regressor and scheme: the RMSLE of every fold, their mean with a 95 % t-interval across folds
(folds are few, so the interval is wide: that is the point of reporting it) and the RMSLE pooled
over all held-out rows. ``flops-proportional`` is the baseline every regressor must beat: P90 =
the training rows' median time per GFLOP times the model's GFLOPs, blind to the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
from scipy import stats

from hetsched.core.errors import DataError
from hetsched.tail.dataset import CELL_KEYS, TARGET
from hetsched.tail.regressors import REGRESSORS, FittedRegressor, log_target, rmse, rmsle

SCHEMES = ("random", "cell", "model")
BASELINE = "flops-proportional"
CONFIDENCE = 0.95


def _groups(rows: list[dict], scheme: str) -> list[str]:
    """Each row's group label under ``scheme`` (every row its own group for ``random``)."""
    if scheme == "random":
        return [str(i) for i in range(len(rows))]
    keys = CELL_KEYS if scheme == "cell" else ("model",)
    try:
        return ["|".join(str(r[k]) for k in keys) for r in rows]
    except KeyError as error:
        raise DataError(f"rows lack the column {error} that scheme {scheme!r} groups by") from None


def folds(rows: list[dict], scheme: str, k: int, seed: int) -> list[np.ndarray]:
    """Held-out row indices of each fold: groups shuffled by ``seed`` and dealt round-robin into
    ``k`` folds (``model``: one fold per model, whatever ``k``)."""
    if scheme not in SCHEMES:
        raise DataError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    labels = _groups(rows, scheme)
    unique = sorted(set(labels))
    n_folds = len(unique) if scheme == "model" else min(k, len(unique))
    if n_folds < 2:
        raise DataError(f"scheme {scheme!r} needs at least 2 groups, the rows have {len(unique)}")
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[g]: position % n_folds for position, g in enumerate(order)}
    assigned = np.array([fold_of[label] for label in labels])
    return [np.flatnonzero(assigned == f) for f in range(n_folds)]


def _baseline_predict(train: list[dict], test: list[dict]) -> np.ndarray:
    """P90 (ms) = median training time per GFLOP x GFLOPs (the :data:`BASELINE`)."""
    per_gflop = float(np.median(log_target(train)))
    gflops = np.array([float(r["flops"]) for r in test]) / 1e9
    return np.exp(per_gflop) * gflops


def _predictors(seed: int) -> Iterator[tuple[str, Callable[[list[dict], list[dict]], np.ndarray]]]:
    """(name, fit-and-predict in ms) for the baseline and every registered regressor."""
    yield BASELINE, _baseline_predict
    for name in REGRESSORS.names():

        def fit_predict(train: list[dict], test: list[dict], name: str = name) -> np.ndarray:
            fitted = FittedRegressor(name, REGRESSORS.create(name, seed=seed)).fit(train)
            return fitted.predict_p90_s(test) * 1e3

        yield name, fit_predict


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval of per-fold values (the mean twice for one value)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, mean, mean
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * stats.sem(values)
    half = 0.0 if math.isnan(half) else float(half)
    return mean, mean - half, mean + half


def cross_validate(rows: list[dict], scheme: str, k: int = 5, seed: int = 0) -> list[dict]:
    """One Table III row per predictor under ``scheme`` (module docstring)."""
    fold_indices = folds(rows, scheme, k, seed)
    y_ms = np.array([float(r[TARGET]) for r in rows]) * 1e3
    table = []
    for name, fit_predict in _predictors(seed):
        pooled = np.zeros(len(rows))
        per_fold = []
        for held_out in fold_indices:
            held = set(held_out.tolist())
            train = [r for i, r in enumerate(rows) if i not in held]
            test = [rows[i] for i in held_out]
            pred_ms = fit_predict(train, test)
            pooled[held_out] = pred_ms
            per_fold.append(rmsle(y_ms[held_out], pred_ms))
        mean, low, high = mean_interval(per_fold)
        low = max(low, 0.0)  # an RMSLE is never negative, whatever the t-interval says
        table.append(
            {
                "scheme": scheme,
                "regressor": name,
                "folds": len(fold_indices),
                "rmsle_mean": mean,
                "rmsle_low": low,
                "rmsle_high": high,
                "rmsle_pooled": rmsle(y_ms, pooled),
                "rmse_ms_pooled": rmse(y_ms, pooled),
                "rmsle_folds": per_fold,
            }
        )
    return table


def grouped_table(rows: list[dict], k: int = 5, seed: int = 0) -> list[dict]:
    """:func:`cross_validate` under every scheme of :data:`SCHEMES`, one table."""
    return [row for scheme in SCHEMES for row in cross_validate(rows, scheme, k, seed)]


def best_on_unseen_cells(rows: list[dict], k: int = 5, seed: int = 0) -> tuple[str, list[dict]]:
    """The regressor with the lowest leave-cell-out RMSLE (mean over folds), and that table.

    A random split rewards a regressor that memorises the cells it has seen (their repeats are
    on both sides); the scheduler asks about node states between the measured ones, so harness
    rows, which name their cells, choose by unseen cells (issue 16).
    """
    table = cross_validate(rows, "cell", k, seed)
    learned = [r for r in table if r["regressor"] != BASELINE]
    return min(learned, key=lambda r: r["rmsle_mean"])["regressor"], table
