"""Fitted regressors as plain JSON parameters, so loading a model file cannot run code.

A pickled estimator executes whatever its file says when it is loaded; a model repository is a
folder an operator (or anyone who can write there) fills, so the repository stores numbers only:

  - random forest (sklearn): every tree's split feature, threshold, children and leaf value;
    prediction walks all trees at once, as ``DecisionTreeRegressor`` does (inputs rounded to
    float32, ``x <= threshold`` goes left) and averages them as the forest does;
  - MLP (sklearn pipeline of ``StandardScaler`` and ``MLPRegressor``): the scaler's mean and
    scale, each layer's weights and biases and the hidden activation;
  - XGBoost: the booster in XGBoost's own JSON model format, read back by XGBoost's JSON loader;
  - Gaussian process (sklearn pipeline of ``StandardScaler`` and ``GaussianProcessRegressor``
    with a constant x RBF + white-noise kernel): the scaler, the standardised training inputs,
    the dual coefficients, the kernel's constant and length scales, and the target's mean and
    scale (``normalize_y``); the white noise adds nothing away from the training inputs.

Each predictor answers ``predict(X)`` exactly as the estimator it was exported from (tested).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from hetsched.core.errors import DataError

FORMAT_NAME = "hetsched-regressor"
FORMAT_VERSION = 1
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda h: np.maximum(h, 0.0),
    "tanh": np.tanh,
    "logistic": lambda h: 1.0 / (1.0 + np.exp(-h)),
    "identity": lambda h: h,
}


class Predictor(Protocol):
    """What :class:`~hetsched.tail.regressors.FittedRegressor` needs from an estimator."""

    def predict(self, x: np.ndarray) -> np.ndarray: ...


class TreeEnsemble:
    """A random forest's trees in flat arrays (node ids global across trees)."""

    kind = "tree_ensemble"

    def __init__(
        self,
        roots: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        feature: np.ndarray,
        threshold: np.ndarray,
        value: np.ndarray,
        max_depth: int,
    ) -> None:
        n = len(left)
        if not (len(right) == len(feature) == len(threshold) == len(value) == n) or n == 0:
            raise DataError("tree ensemble arrays differ in length")
        leaf = left < 0
        inner = ~leaf
        if (roots < 0).any() or (roots >= n).any():
            raise DataError("tree ensemble root out of range")
        if (feature[inner] < 0).any() or not 0 <= max_depth <= n:
            raise DataError("tree ensemble split feature or depth out of range")
        for child in (left[inner], right[inner]):
            if (child < 0).any() or (child >= n).any():
                raise DataError("tree ensemble child out of range")
        self.roots = roots.astype(np.int64)
        # Leaves point to themselves, so a walk of max_depth steps can stop anywhere safely.
        ids = np.arange(n, dtype=np.int64)
        self.left = np.where(leaf, ids, left).astype(np.int64)
        self.right = np.where(leaf, ids, right).astype(np.int64)
        self.feature = np.where(leaf, 0, feature).astype(np.int64)
        self.threshold = threshold.astype(np.float64)
        self.value = value.astype(np.float64)
        self.max_depth = int(max_depth)

    @classmethod
    def from_sklearn(cls, forest: Any) -> TreeEnsemble:
        roots, lefts, rights, features, thresholds, values = [], [], [], [], [], []
        offset = 0
        for tree in (e.tree_ for e in forest.estimators_):
            roots.append(offset)
            left, right = tree.children_left.copy(), tree.children_right.copy()
            lefts.append(np.where(left >= 0, left + offset, -1))
            rights.append(np.where(right >= 0, right + offset, -1))
            features.append(tree.feature)
            thresholds.append(tree.threshold)
            values.append(tree.value[:, 0, 0])
            offset += tree.node_count
        depth = max(e.tree_.max_depth for e in forest.estimators_)
        stack = np.concatenate
        return cls(
            np.array(roots),
            stack(lefts),
            stack(rights),
            stack(features),
            stack(thresholds),
            stack(values),
            depth,
        )

    def predict(self, x: np.ndarray) -> np.ndarray:
        rows = np.asarray(x, dtype=np.float32).astype(np.float64)
        if self.feature.max() >= rows.shape[1]:
            raise DataError(f"the model needs {self.feature.max() + 1} features")
        node = np.broadcast_to(self.roots, (len(rows), len(self.roots))).copy()
        row_ids = np.arange(len(rows))[:, None]
        for _ in range(self.max_depth):
            go_left = rows[row_ids, self.feature[node]] <= self.threshold[node]
            node = np.where(go_left, self.left[node], self.right[node])
        return self.value[node].mean(axis=1)

    def params(self) -> dict:
        return {
            "roots": self.roots.tolist(),
            "left": np.where(self.left == np.arange(len(self.left)), -1, self.left).tolist(),
            "right": np.where(self.left == np.arange(len(self.left)), -1, self.right).tolist(),
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "value": self.value.tolist(),
            "max_depth": self.max_depth,
        }

    @classmethod
    def from_params(cls, p: dict) -> TreeEnsemble:
        def ints(key: str) -> np.ndarray:
            return np.asarray(p[key], dtype=np.int64)

        def floats(key: str) -> np.ndarray:
            return np.asarray(p[key], dtype=np.float64)

        return cls(
            ints("roots"),
            ints("left"),
            ints("right"),
            ints("feature"),
            floats("threshold"),
            floats("value"),
            int(p["max_depth"]),
        )


class DenseNetwork:
    """Standardise, then a feed-forward network with one hidden activation and a linear output."""

    kind = "dense_network"

    def __init__(
        self,
        mean: np.ndarray,
        scale: np.ndarray,
        weights: list[np.ndarray],
        biases: list[np.ndarray],
        activation: str,
    ) -> None:
        if activation not in ACTIVATIONS:
            raise DataError(f"unknown activation {activation!r}; known: {sorted(ACTIVATIONS)}")
        if len(weights) != len(biases) or not weights:
            raise DataError("dense network needs as many bias vectors as weight matrices")
        width = len(mean)
        for w, b in zip(weights, biases, strict=True):
            if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
                raise DataError("dense network layer shapes do not chain")
            width = w.shape[1]
        self.mean, self.scale = mean, scale
        self.weights, self.biases, self.activation = weights, biases, activation

    @classmethod
    def from_sklearn(cls, pipeline: Any) -> DenseNetwork:
        scaler, mlp = pipeline.steps[0][1], pipeline.steps[-1][1]
        return cls(
            np.asarray(scaler.mean_),
            np.asarray(scaler.scale_),
            [np.asarray(w) for w in mlp.coefs_],
            [np.asarray(b) for b in mlp.intercepts_],
            mlp.activation,
        )

    def predict(self, x: np.ndarray) -> np.ndarray:
        h = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        hidden = ACTIVATIONS[self.activation]
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < last:
                h = hidden(h)
        return h.ravel()

    def params(self) -> dict:
        return {
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": [w.tolist() for w in self.weights],
            "biases": [b.tolist() for b in self.biases],
            "activation": self.activation,
        }

    @classmethod
    def from_params(cls, p: dict) -> DenseNetwork:
        return cls(
            np.asarray(p["mean"], dtype=np.float64),
            np.asarray(p["scale"], dtype=np.float64),
            [np.asarray(w, dtype=np.float64) for w in p["weights"]],
            [np.asarray(b, dtype=np.float64) for b in p["biases"]],
            str(p["activation"]),
        )


class XGBoostModel:
    """An XGBoost booster kept in XGBoost's JSON model format."""

    kind = "xgboost"

    def __init__(self, model_json: dict) -> None:
        import xgboost

        self.model_json = model_json
        self.booster = xgboost.Booster()
        try:
            self.booster.load_model(bytearray(json.dumps(model_json).encode()))
        except xgboost.core.XGBoostError as error:
            raise DataError(f"not an XGBoost JSON model: {error}") from None

    @classmethod
    def from_sklearn(cls, regressor: Any) -> XGBoostModel:
        return cls(json.loads(bytes(regressor.get_booster().save_raw("json"))))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.inplace_predict(np.asarray(x, dtype=np.float64)))

    def params(self) -> dict:
        return self.model_json

    @classmethod
    def from_params(cls, p: dict) -> XGBoostModel:
        return cls(p)


# A model file is read from a folder an operator fills; bound what one can make a prediction cost.
GP_MAX_TRAINING_POINTS = 20_000
GP_SLICE_ELEMENTS = 4_000_000


class GaussianProcess:
    """A Gaussian process's posterior mean: standardise, then an RBF kernel against the stored
    training inputs, weighted by the dual coefficients, scaled back to the target."""

    kind = "gaussian_process"

    def __init__(
        self,
        mean: np.ndarray,
        scale: np.ndarray,
        train_x: np.ndarray,
        dual_coef: np.ndarray,
        constant: float,
        length_scale: np.ndarray,
        y_mean: float,
        y_scale: float,
    ) -> None:
        width = len(mean)
        if (
            scale.shape != (width,)
            or train_x.ndim != 2
            or train_x.shape[1] != width
            or dual_coef.shape != (train_x.shape[0],)
            or length_scale.shape not in ((width,), (1,))
            or not np.all(length_scale > 0)
            or not np.all(scale > 0)
        ):
            raise DataError("Gaussian process arrays do not fit together")
        if len(train_x) > GP_MAX_TRAINING_POINTS:
            raise DataError(
                f"Gaussian process with {len(train_x)} training inputs (at most "
                f"{GP_MAX_TRAINING_POINTS}: each prediction costs one kernel row per input)"
            )
        numbers = (mean, scale, train_x, dual_coef, length_scale, [constant, y_mean, y_scale])
        if not all(np.all(np.isfinite(v)) for v in numbers):
            raise DataError("Gaussian process parameters must be finite numbers")
        self.mean, self.scale, self.train_x, self.dual_coef = mean, scale, train_x, dual_coef
        self.constant, self.length_scale = constant, length_scale
        self.y_mean, self.y_scale = y_mean, y_scale

    @classmethod
    def from_sklearn(cls, pipeline: Any) -> GaussianProcess:
        scaler, gp = pipeline.steps[0][1], pipeline.steps[-1][1]
        kernel = gp.kernel_
        names = [type(k).__name__ for k in (kernel, kernel.k1, kernel.k1.k1, kernel.k1.k2)]
        if names != ["Sum", "Product", "ConstantKernel", "RBF"] or (
            type(kernel.k2).__name__ != "WhiteKernel"
        ):
            raise DataError(f"no portable form for a Gaussian process with kernel {kernel}")
        return cls(
            np.asarray(scaler.mean_),
            np.asarray(scaler.scale_),
            np.asarray(gp.X_train_),
            np.asarray(gp.alpha_).ravel(),
            float(kernel.k1.k1.constant_value),
            np.atleast_1d(np.asarray(kernel.k1.k2.length_scale, dtype=np.float64)),
            float(np.ravel(gp._y_train_mean)[0]),
            float(np.ravel(gp._y_train_std)[0]),
        )

    def predict(self, x: np.ndarray) -> np.ndarray:
        # Squared distances as |a|^2 + |b|^2 - 2 a.b over length-scaled inputs: one matrix
        # product instead of a queries x inputs x features tensor (the extender asks hundreds
        # of rows per request).
        a = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale / self.length_scale
        b = self.train_x / self.length_scale
        b_norms = np.sum(b * b, axis=1)
        out = np.empty(len(a))
        # Queries in slices, so the kernel matrix stays near GP_SLICE_ELEMENTS floats.
        step = max(1, GP_SLICE_ELEMENTS // max(len(b), 1))
        for first in range(0, len(a), step):
            part = a[first : first + step]
            squared = np.sum(part * part, axis=1)[:, None] + b_norms[None, :] - 2.0 * part @ b.T
            k = self.constant * np.exp(-0.5 * np.maximum(squared, 0.0))
            out[first : first + step] = k @ self.dual_coef
        return out * self.y_scale + self.y_mean

    def params(self) -> dict:
        return {
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "train_x": self.train_x.tolist(),
            "dual_coef": self.dual_coef.tolist(),
            "constant": self.constant,
            "length_scale": self.length_scale.tolist(),
            "y_mean": self.y_mean,
            "y_scale": self.y_scale,
        }

    @classmethod
    def from_params(cls, p: dict) -> GaussianProcess:
        return cls(
            np.asarray(p["mean"], dtype=np.float64),
            np.asarray(p["scale"], dtype=np.float64),
            np.asarray(p["train_x"], dtype=np.float64),
            np.asarray(p["dual_coef"], dtype=np.float64),
            float(p["constant"]),
            np.asarray(p["length_scale"], dtype=np.float64),
            float(p["y_mean"]),
            float(p["y_scale"]),
        )


PortableModel = TreeEnsemble | DenseNetwork | XGBoostModel | GaussianProcess
KINDS: dict[str, Any] = {
    k.kind: k for k in (TreeEnsemble, DenseNetwork, XGBoostModel, GaussianProcess)
}


def portable(estimator: Any) -> PortableModel:
    """The JSON-expressible form of a fitted estimator from :data:`REGRESSORS`."""
    if isinstance(estimator, (TreeEnsemble, DenseNetwork, XGBoostModel, GaussianProcess)):
        return estimator
    kind = type(estimator).__name__
    if kind == "RandomForestRegressor":
        return TreeEnsemble.from_sklearn(estimator)
    last = type(estimator.steps[-1][1]).__name__ if kind == "Pipeline" else ""
    if last == "MLPRegressor":
        return DenseNetwork.from_sklearn(estimator)
    if last == "GaussianProcessRegressor":
        return GaussianProcess.from_sklearn(estimator)
    if kind == "XGBRegressor":
        return XGBoostModel.from_sklearn(estimator)
    raise DataError(f"no portable form for a {kind}")


def to_document(estimator: Any) -> dict:
    """The model file's JSON document for ``estimator``."""
    model = portable(estimator)
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": model.kind,
        "params": model.params(),
    }


def from_document(document: Any, origin: str) -> PortableModel:
    """The predictor a model file describes; anything malformed is a :class:`DataError`."""
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise DataError(f"not a {FORMAT_NAME} model file", path=origin)
    if document.get("version") != FORMAT_VERSION:
        raise DataError(f"unsupported model file version {document.get('version')!r}", path=origin)
    kind = KINDS.get(str(document.get("kind")))
    if kind is None:
        raise DataError(f"unknown model kind {document.get('kind')!r}", path=origin)
    try:
        return kind.from_params(document["params"])
    except (KeyError, TypeError, ValueError) as error:
        raise DataError(f"malformed {kind.kind} parameters: {error!r}", path=origin) from None
