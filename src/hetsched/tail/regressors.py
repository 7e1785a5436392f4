"""P90 regressors (RF, XGBoost, MLP): RMSE/RMSLE comparison (Table III), grid search, repository.

Units: RMSE and RMSLE are computed on P90 in milliseconds (as the paper's Table III reads: RMSE of
~2 with latencies of tens of ms).

Target (issue 16): the regressors learn log(P90 in ms per GFLOP), the time a node takes per unit
of work, and a prediction is exp(·) times the model's GFLOPs. A tree ensemble predicts a constant
outside the inputs it was trained on; on the plain log P90 it therefore gave a model it had not
seen (or one beside it in FLOPs) the latency of its neighbour — ResNet-50 and RetinaNet, 4x apart
in FLOPs, got the same P90. With the per-GFLOP target the FLOPs enter the prediction by
construction, and the learned part is what differs between models of equal work (their size and
arithmetic intensity) and between nodes (eq. 8's capacity).

Inputs (eq. 14 plus one derived column): log10 FLOPs, size (MiB, which is the parameters' bytes),
eq. 8's CPU_eff and FREQ_eff, and the arithmetic intensity log10(FLOPs / weight bytes): models of
equal FLOPs but more weights per FLOP wait on memory more.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.core.errors import DataError
from hetsched.core.registry import Registry
from hetsched.tail.dataset import FEATURES, TARGET
from hetsched.tail.portable_regressors import from_document, to_document

REGRESSORS: Registry = Registry("regressor")
LOG = logging.getLogger(__name__)


@REGRESSORS.register("random_forest")
def _random_forest(seed: int):
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=50, random_state=seed, n_jobs=1)


@REGRESSORS.register("xgboost")
def _xgboost(seed: int):
    from xgboost import XGBRegressor

    return XGBRegressor(
        n_estimators=200, max_depth=4, learning_rate=0.1, random_state=seed, n_jobs=1
    )


@REGRESSORS.register("mlp")
def _mlp(seed: int):
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        StandardScaler(),
        MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=2000, random_state=seed),
    )


@REGRESSORS.register("gaussian_process")
def _gaussian_process(seed: int):
    """Standardised inputs, a constant times an ARD RBF kernel plus white noise (the repeats'
    spread), hyperparameters by marginal likelihood. Smooth between grid cells where trees step:
    on the quiet 2-core grids leave-cell-out RMSLE 0.17 against 0.24 for the best tree ensemble
    (benchmarks/RESULTS.md, "a Gaussian process between the cells"). An input that does not
    matter is switched off by its length scale reaching the upper bound."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(
        np.ones(len(FEATURES) + 1), (1e-2, 1e3)
    ) + WhiteKernel(0.01, (1e-6, 1.0))
    return make_pipeline(
        StandardScaler(),
        GaussianProcessRegressor(
            kernel, normalize_y=True, n_restarts_optimizer=2, random_state=seed
        ),
    )


# Forests are capped at 50 trees: sklearn predicts tree by tree (~40 us each here), and a 100-node
# /prioritize must stay under the extender's 5 ms p99 (benchmarks/bench_tail_extender.py).
GRIDS = {
    "random_forest": {
        "n_estimators": [25, 50],
        "max_depth": [None, 8],
        "min_samples_leaf": [1, 3],
    },
    "xgboost": {"n_estimators": [100, 300], "max_depth": [3, 6], "learning_rate": [0.05, 0.2]},
    "mlp": {
        "mlpregressor__hidden_layer_sizes": [(32,), (64, 64)],
        "mlpregressor__alpha": [1e-4, 1e-2],
    },
    # Jitter added to the kernel's diagonal on top of the learned white noise.
    "gaussian_process": {"gaussianprocessregressor__alpha": [1e-10, 1e-3]},
}


# Names the target so a repository version trained on another one is refused, not misread.
TARGET_TRANSFORM = "log(p90_ms / gflops)"
MIB_BYTES = 2**20
# The node-side inputs (eq. 8); the others describe the model.
NODE_FEATURES = ("cpu_eff", "freq_eff_ghz")
NODE_COLUMNS = [FEATURES.index(name) for name in NODE_FEATURES]
# Regressors whose prediction returns to the training mean away from the data (an RBF kernel's
# does): only their node inputs are clamped. A model beyond the grid then gets the mean time per
# GFLOP times its GFLOPs instead of the edge model's; leave-one-model-out RMSLE 0.39 -> 0.22 on
# the dense grid (benchmarks/RESULTS.md). Node inputs stay clamped: there the process inverted
# the ranking of idle nodes of 1-16 cores (38 inversions).
MEAN_REVERTING = frozenset({"gaussian_process"})


def feature_matrix(rows: list[dict]) -> np.ndarray:
    """Inputs of eq. 14 in :data:`FEATURES` order, FLOPs in log10 so every input is O(1-10), and
    the arithmetic intensity log10(FLOPs / weight bytes) as a last column."""
    columns = itemgetter(*FEATURES)
    x = np.array([columns(r) for r in rows], dtype=float).reshape(len(rows), len(FEATURES))
    flops = np.maximum(x[:, FEATURES.index("flops")], 1.0)
    weight_bytes = np.maximum(x[:, FEATURES.index("size_mb")] * MIB_BYTES, 1.0)
    x[:, FEATURES.index("flops")] = np.log10(flops)
    return np.column_stack([x, np.log10(flops / weight_bytes)])


def _log_gflops(rows: list[dict]) -> np.ndarray:
    return np.log(np.maximum(np.array([float(r["flops"]) for r in rows]), 1.0) / 1e9)


def log_target(rows: list[dict]) -> np.ndarray:
    """The regression target of each row: log(P90 in ms per GFLOP) (module docstring)."""
    p90_ms = np.maximum(np.array([float(r[TARGET]) for r in rows]) * 1e3, 1e-6)
    return np.log(p90_ms) - _log_gflops(rows)


def rmse(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def rmsle(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.log1p(np.maximum(pred, 0)) - np.log1p(y)) ** 2)))


@dataclass
class FittedRegressor:
    """A fitted estimator on log(P90 per GFLOP), plus what it was trained on.

    ``input_range`` keeps, per input column (:func:`feature_matrix` order), the smallest and
    largest value of the training rows; predictions clamp their inputs to it. A regressor never
    extrapolates then: a node with more cores than any training row gets the prediction at the
    grid's edge, and a model beyond the grid the edge's time per GFLOP times its own GFLOPs. Without
    the clamp an MLP trained on nodes of one and two cores ranked a one-core node above an
    eight-core one (benchmarks/RESULTS.md, "a regressor never extrapolates"). A regressor of
    :data:`MEAN_REVERTING` has only its node inputs clamped.
    """

    name: str
    estimator: Any
    features: tuple[str, ...] = FEATURES
    input_range: np.ndarray | None = None
    """2 x columns: lows, then highs; None for a version saved before ranges were kept."""

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
        """P90 (s) per row: the learned time per GFLOP times the row's GFLOPs."""
        x = feature_matrix(rows)
        if self.input_range is not None:
            low, high = self.input_range
            if self.name in MEAN_REVERTING:
                x[:, NODE_COLUMNS] = np.clip(
                    x[:, NODE_COLUMNS], low[NODE_COLUMNS], high[NODE_COLUMNS]
                )
            else:
                x = np.clip(x, low, high)
        per_gflop = self.estimator.predict(x)
        return np.exp(per_gflop + _log_gflops(rows)) / 1e3

    def fit(self, rows: list[dict]) -> FittedRegressor:
        """Fits the estimator on rows holding :data:`FEATURES` and the target; returns self."""
        x = feature_matrix(rows)
        fit_quietly(self.estimator, x, log_target(rows))
        self.input_range = column_range(x)
        return self

    def node_range(self) -> dict[str, tuple[float, float]] | None:
        """The trained range of the node inputs (eq. 8's CPU_eff and FREQ_eff), for operators."""
        if self.input_range is None:
            return None
        return {
            name: (float(self.input_range[0, i]), float(self.input_range[1, i]))
            for i, name in enumerate(FEATURES)
            if name in NODE_FEATURES
        }


def fit_quietly(estimator: Any, x: np.ndarray, y: np.ndarray) -> Any:
    """``estimator.fit(x, y)`` without scikit-learn's convergence notes: on these small grids a
    Gaussian process switching an input off at its length-scale bound, or an MLP stopping at
    ``max_iter``, is expected, and the validation tables, not the warnings, judge the fit."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(x, y)


def column_range(x: np.ndarray) -> np.ndarray:
    """Per column of ``x``, its smallest and largest value (2 x columns)."""
    return np.array([x.min(axis=0), x.max(axis=0)])


MIN_TRAINING_ROWS = 8


def check_enough_rows(rows: list[dict]) -> None:
    """Training holds rows out to test on: fewer than :data:`MIN_TRAINING_ROWS` is a
    :class:`DataError` before any fitting starts."""
    if len(rows) < MIN_TRAINING_ROWS:
        raise DataError(
            f"need at least {MIN_TRAINING_ROWS} rows to train and test, got {len(rows)}"
        )


def _split(rows: list[dict], seed: int, test_fraction: float):
    check_enough_rows(rows)
    order = np.random.default_rng(seed).permutation(len(rows))
    n_test = max(2, int(len(rows) * test_fraction))
    return [rows[i] for i in order[n_test:]], [rows[i] for i in order[:n_test]]


def compare_regressors(rows: list[dict], seed: int = 0, test_fraction: float = 0.25) -> list[dict]:
    """Table III: RMSE (ms) and RMSLE of each registered regressor on a held-out split."""
    train, test = _split(rows, seed, test_fraction)
    y_test_ms = np.array([r[TARGET] for r in test]) * 1e3
    table = []
    for name in REGRESSORS.names():
        fitted = FittedRegressor(name, REGRESSORS.create(name, seed=seed)).fit(train)
        pred_ms = fitted.predict_p90_s(test) * 1e3
        table.append(
            {
                "regressor": name,
                "rmse_ms": rmse(y_test_ms, pred_ms),
                "rmsle": rmsle(y_test_ms, pred_ms),
                "train_rows": len(train),
                "test_rows": len(test),
            }
        )
    return table


def summarize_splits(tables: list[list[dict]]) -> list[dict]:
    """Table III over several held-out splits (one :func:`compare_regressors` table per split):
    mean, min and max RMSLE per regressor.

    With a few dozen rows one 25 % split holds ~20-40 points, and its RMSLE moves by ±0.1 from
    split to split; the spread over splits says how far a single Table III figure can be trusted.
    """
    if not tables:
        raise DataError("no Table III splits to summarise")
    by_name: dict[str, list[float]] = {}
    for table in tables:
        for row in table:
            by_name.setdefault(row["regressor"], []).append(row["rmsle"])
    return [
        {
            "regressor": name,
            "splits": len(values),
            "rmsle_mean": float(np.mean(values)),
            "rmsle_min": min(values),
            "rmsle_max": max(values),
        }
        for name, values in by_name.items()
    ]


def grid_search(name: str, rows: list[dict], seed: int = 0, test_fraction: float = 0.25) -> dict:
    """Tunes one regressor by 3-fold grid search on the training split; scores on the test split."""
    from sklearn.model_selection import GridSearchCV

    train, test = _split(rows, seed, test_fraction)
    search = GridSearchCV(
        REGRESSORS.create(name, seed=seed),
        GRIDS[name],
        cv=3,
        scoring="neg_root_mean_squared_error",
        n_jobs=1,
    )
    x_train = feature_matrix(train)
    fit_quietly(search, x_train, log_target(train))
    fitted = FittedRegressor(name, search.best_estimator_, input_range=column_range(x_train))
    y_test_ms = np.array([r[TARGET] for r in test]) * 1e3
    pred_ms = fitted.predict_p90_s(test) * 1e3
    # Refit the tuned configuration on every row for deployment.
    fitted.fit(rows)
    return {
        "fitted": fitted,
        "best_params": search.best_params_,
        "metrics": {"rmse_ms": rmse(y_test_ms, pred_ms), "rmsle": rmsle(y_test_ms, pred_ms)},
    }


def data_fingerprint(rows: list[dict]) -> str:
    """SHA-256 of the features and target, so a saved model names the exact data it saw."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps([row[f] for f in (*FEATURES, TARGET)]).encode())
    return digest.hexdigest()[:16]


MODEL_FILE = "model.json"
# Files of earlier versions: unpickling runs code, so they are refused with a way forward.
PICKLED_MODEL_FILE = "model.pkl"


class ModelRepository:
    """Versioned folder of regressors: ``v0001/{model.json, meta.json}`` and ``latest`` as a file.

    ``model.json`` holds the estimator's parameters (see :mod:`.portable_regressors`): loading a
    version parses numbers, it never unpickles or runs anything from the folder.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def versions(self) -> list[str]:
        return sorted(p.name for p in self.root.glob("v[0-9][0-9][0-9][0-9]") if p.is_dir())

    def save(self, fitted: FittedRegressor, metrics: dict, fingerprint: str, extra: dict) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        version = f"v{len(self.versions()) + 1:04d}"
        folder = self.root / version
        folder.mkdir()
        (folder / MODEL_FILE).write_text(json.dumps(to_document(fitted.estimator)))
        meta = {
            "version": version,
            "regressor": fitted.name,
            "features": list(fitted.features),
            "target": TARGET,
            "target_transform": TARGET_TRANSFORM,
            "input_range": None if fitted.input_range is None else fitted.input_range.tolist(),
            "metrics": metrics,
            "data_fingerprint": fingerprint,
            "created_s": time.time(),
            **extra,
        }
        (folder / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
        (self.root / "latest").write_text(version)
        return version

    def load(self, version: str | None = None) -> tuple[FittedRegressor, dict]:
        latest = self.root / "latest"
        if version is None:
            if not latest.is_file():
                raise DataError(
                    "model repository is empty; run `hetsched tail train`", path=str(self.root)
                )
            version = latest.read_text().strip()
        if not version.startswith("v") or not version[1:].isdigit():
            raise DataError(f"bad model version {version!r} (expected v0001, ...)")
        folder = self.root / version
        model_file = folder / MODEL_FILE
        if not model_file.is_file():
            if (folder / PICKLED_MODEL_FILE).is_file():
                raise DataError(
                    f"{version} is a pickled model, which is no longer loaded (unpickling runs "
                    "code); retrain it with `hetsched tail train`",
                    path=str(self.root),
                )
            raise DataError(f"no model version {version}", path=str(self.root))
        try:
            meta = json.loads((folder / "meta.json").read_text())
            document = json.loads(model_file.read_text())
        except (OSError, ValueError) as error:
            raise DataError(
                f"unreadable model version {version}: {error}", path=str(folder)
            ) from None
        if meta.get("target_transform") != TARGET_TRANSFORM:
            raise DataError(
                f"{version} learned another target than {TARGET_TRANSFORM!r}; retrain it with "
                "`hetsched tail train`",
                path=str(folder),
            )
        if tuple(meta.get("features", ())) != FEATURES:
            raise DataError(
                f"{version} was trained on features {meta.get('features')}, not {list(FEATURES)}",
                path=str(folder),
            )
        estimator = from_document(document, str(model_file))
        name = str(meta.get("regressor", document["kind"]))
        input_range = _input_range(meta.get("input_range"), version, folder)
        return FittedRegressor(name, estimator, input_range=input_range), meta


def _input_range(value: Any, version: str, folder: Path) -> np.ndarray | None:
    """A saved version's input range, checked (2 x columns of finite numbers, lows <= highs);
    None for a version saved before ranges were kept (its predictions are not clamped).

    Raises:
        DataError: For anything else.
    """
    if value is None:
        LOG.warning(
            "model %s has no input range (saved before ranges were kept): its predictions are not"
            " clamped to the training grid and may rank nodes beyond it wrongly; train it again"
            " (`hetsched tail train` or `retrain`)",
            version,
        )
        return None
    columns = len(FEATURES) + 1
    try:
        bounds = np.array(value, dtype=float)
    except (TypeError, ValueError):
        bounds = np.empty(0)
    well_formed = bounds.shape == (2, columns) and bool(np.isfinite(bounds).all())
    if not well_formed or bool((bounds[0] > bounds[1]).any()):
        raise DataError(
            f"{version}: input_range in meta.json must be two lists of {columns} finite numbers,"
            " lows then highs",
            path=str(folder),
        )
    return bounds


def train_and_save(
    rows: list[dict],
    repo: ModelRepository,
    seed: int = 0,
    chosen: tuple[str, str] | None = None,
) -> dict:
    """Compares all regressors (Table III), grid-searches one, saves it; returns a report.

    Args:
        chosen: (regressor, how it was chosen) when the caller chose it on other evidence
            (``hetsched tail train``: RMSLE on unseen cells); None: the lowest random-split RMSLE.
    """
    table = compare_regressors(rows, seed)
    best, chosen_by = chosen or (min(table, key=lambda r: r["rmsle"])["regressor"], "random split")
    tuned = grid_search(best, rows, seed)
    version = repo.save(
        tuned["fitted"],
        tuned["metrics"],
        data_fingerprint(rows),
        {
            "best_params": tuned["best_params"],
            "table_iii": table,
            "rows": len(rows),
            "chosen_by": chosen_by,
        },
    )
    return {
        "table_iii": table,
        "best": best,
        "chosen_by": chosen_by,
        "tuned": tuned["metrics"],
        "best_params": tuned["best_params"],
        "version": version,
        "node_range": tuned["fitted"].node_range(),
    }
