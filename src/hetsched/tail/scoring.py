"""Scores candidate nodes for a pod by predicted P90 (lower P90 → higher score, 0..10).

Shared by the HTTP extender, the stand-alone scheduler loop and the benchmark, so all three rank
nodes identically.

Score scaling (the extender's ``MaxExtenderPriority`` is 10). The regressor predicts
x = log1p(P90 in ms) with an error of about its RMSLE, which is in the same unit; call it the
error band b. A node's score counts how many whole bands its prediction lies above the best
node's:

    score = 10 − ⌊(x_node − x_best) / b⌋, clipped to [0, 10]

so it is monotone (a higher predicted P90 never scores higher), nodes within one band of the best
all get 10 (a gap the model cannot resolve gives no preference: the dead band), and each further
point costs one more band — about ×e^b in P90 — whatever the spread of the other nodes. Min-max
normalisation, which this replaced, stretched any gap, a 0.2 ms one included, to scores 0 and 10.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.quantities import parse_cpu_cores

MAX_EXTENDER_PRIORITY = 10
NEUTRAL_SCORE = MAX_EXTENDER_PRIORITY // 2
# kube-scheduler's framework.MaxNodeScore: a score plugin's range, to which it scales extender
# priorities (× MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY) before adding them times their weight.
MAX_NODE_SCORE = 100
# Our extender's weight in the sample KubeSchedulerConfiguration (extender.scheduler_config)
# and in the benchmark's "default+extender" scorer, which models that deployment.
EXTENDER_WEIGHT = 5
# The error band b when the model's own RMSLE is not known: Table III's best regressors reach
# RMSLE ~0.19-0.20 on held-out data.
DEFAULT_ERROR_BAND = 0.2
FREQ_LABEL = "hetsched.io/cpu-freq-ghz"
DEFAULT_FREQ_GHZ = 2.3  # Table I's nodes; used when a node carries no FREQ_LABEL
SLO_ANNOTATION = "hetsched.io/p90-slo-ms"
# Share-grid cells (whole numbers) below this in magnitude are packed into integers to sort.
CELL_LIMIT = 2**20


def score_array(p90_s: np.ndarray, error_band: float = DEFAULT_ERROR_BAND) -> np.ndarray:
    """Priority 0..10 per node by the dead-band scaling of the module docstring.

    A prediction that is not finite (a broken model) scores 0 unless every node's is, in which
    case all score :data:`NEUTRAL_SCORE`.
    """
    if error_band <= 0:
        raise HetschedError(f"the error band must be positive, got {error_band}")
    p90 = np.asarray(p90_s, dtype=float)
    finite = np.isfinite(p90)
    if not finite.any():
        return np.full(len(p90), NEUTRAL_SCORE, dtype=np.int64)
    x = np.log1p(np.maximum(np.where(finite, p90, 0.0), 0.0) * 1e3)
    bands = np.floor((x - x[finite].min()) / error_band)
    scores = MAX_EXTENDER_PRIORITY - np.minimum(bands, MAX_EXTENDER_PRIORITY)
    return np.where(finite, scores, 0).astype(np.int64)


def scores_from_p90(
    p90_s: Mapping[str, float], error_band: float = DEFAULT_ERROR_BAND
) -> dict[str, int]:
    """:func:`score_array` by node name."""
    scores = score_array(np.fromiter(p90_s.values(), float, len(p90_s)), error_band)
    return dict(zip(p90_s, scores.tolist(), strict=True))


def weighted_extender_scores(p90_s: Mapping[str, float]) -> dict[str, int]:
    """What kube-scheduler adds to each node's plugin scores for our prioritize answer.

    Deployed, the extender never decides alone: the scheduler scales its 0..10 priority to the
    plugins' 0..100 and multiplies it by :data:`EXTENDER_WEIGHT`, so a node's final score is its
    plugins' sum plus this (0..500 against 0..200 for NodeResourcesFit + BalancedAllocation).
    """
    scale = EXTENDER_WEIGHT * MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    return {n: scale * s for n, s in scores_from_p90(p90_s).items()}


def parse_freq_label(labels: Mapping[str, str] | None) -> float:
    """A node's clock (GHz) from its :data:`FREQ_LABEL`, or :data:`DEFAULT_FREQ_GHZ`."""
    text = (labels or {}).get(FREQ_LABEL)
    if text is None:
        return DEFAULT_FREQ_GHZ
    try:
        freq = float(text)
    except ValueError:
        raise HetschedError(f"label {FREQ_LABEL}={text[:20]!r} is not a number") from None
    if not 0 < freq < 100:
        raise HetschedError(f"label {FREQ_LABEL}={text[:20]!r} is not a clock in GHz")
    return freq


def idle_capacity(
    name: str, cpu: str | int | float, labels: Mapping[str, str] | None
) -> NodeCapacity:
    """A node's eq. 8 inputs from its Node object alone: allocatable cores, idle."""
    return NodeCapacity(name, parse_cpu_cores(cpu), parse_freq_label(labels), 0.0, 0.0)


def capacity_from_node_object(node: dict, live: Mapping[str, NodeCapacity]) -> NodeCapacity:
    """A node's eq. 8 inputs: live telemetry if known, else its allocatable CPUs, idle."""
    name = node["metadata"]["name"]
    if name in live:
        return live[name]
    status = node.get("status") or {}
    cpu = (status.get("allocatable") or status.get("capacity") or {}).get("cpu")
    if cpu is None:
        raise HetschedError(f"node {name!r} reports no cpu capacity")
    return idle_capacity(name, cpu, node["metadata"].get("labels"))


def _sorted_starts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable order of the rows of a (n, 2) key array by (column 0, column 1), and whether
    each row in that order starts a new key.

    Small whole-number keys (the share grid's cells) are packed into one integer per row and
    argsorted: as uint16, when they fit, NumPy's stable sort is a radix sort, several times
    faster than a lexsort of 5,000 rows. Other keys take the lexsort.
    """
    starts = np.ones(len(keys), dtype=bool)
    if len(keys) and (np.abs(keys) < CELL_LIMIT).all() and (keys == np.round(keys)).all():
        cells = keys.astype(np.int64)
        low = cells.min(axis=0)
        span = int(cells[:, 1].max() - low[1]) + 1
        flat = (cells[:, 0] - low[0]) * span + (cells[:, 1] - low[1])
        if flat.max() < 2**16:
            flat = flat.astype(np.uint16)
        order = np.argsort(flat, kind="stable")
        packed = flat[order]
        starts[1:] = packed[1:] != packed[:-1]
        return order, starts
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    ordered = keys[order]
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return order, starts


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups the rows of a (n, 2) key array: each group's first row (in input order) and each
    row's group, groups ordered by key. ``np.unique(axis=0)`` sorts a structured view and is
    ~10x slower at 5,000 rows."""
    order, starts = _sorted_starts(keys)
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse


class P90Predictor(Protocol):
    """A fitted regressor (:class:`~hetsched.tail.regressors.FittedRegressor`)."""

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray: ...


@dataclass
class P90Scorer:
    """Predicts P90 for a model on each node with a fitted regressor and scores the nodes.

    Args:
        regressor: The fitted P90 regressor.
        live: Live capacities by node name (the scheduler loop's telemetry).
        error_band: The score dead band b (see the module docstring).
        share_within: Nodes whose eq. 8 inputs (cpu_eff, freq_eff) fall in the same step of a
            log grid of this relative width share one prediction (0: only identical inputs do).
            The extender uses 5 %, a quarter of the default dead band and far below the
            regressor's ~20 % error, so thousands of nodes under live load cost at most a few
            hundred regressor rows instead of one each.
        cached_rows: Remember the prediction of up to this many regressor rows (model features
            and eq. 8 inputs) across calls (0: none). Telemetry changes every refresh, not every
            request, so between refreshes the extender's requests ask the same rows again; the
            regressor is deterministic and a row's prediction does not depend on the other rows
            of its batch (trees: exactly; an MLP: to rounding), so an answer from the cache is
            the one the regressor would give. Full, the cache is emptied and refilled.
    """

    regressor: P90Predictor
    live: dict[str, NodeCapacity] = field(default_factory=dict)
    error_band: float = DEFAULT_ERROR_BAND
    share_within: float = 0.0
    cached_rows: int = 0
    _cache: dict[tuple[float, float, float, float], float] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

    def _predict_rows(self, model: ModelFeatures, pairs: list[list[float]]) -> np.ndarray:
        """Predicted P90 (s) of each (cpu_eff, freq_eff_ghz) pair, through the cache."""
        keys = [(model.size_mb, model.flops, cpu, freq) for cpu, freq in pairs]
        cache = self._cache
        found: list[float | None] = [cache.get(key) for key in keys]
        missing = [i for i, p90 in enumerate(found) if p90 is None]
        if missing:
            rows = [
                {"size_mb": size_mb, "flops": flops, "cpu_eff": cpu, "freq_eff_ghz": freq}
                for size_mb, flops, cpu, freq in (keys[i] for i in missing)
            ]
            predicted = np.asarray(self.regressor.predict_p90_s(rows), dtype=float).tolist()
            if self.cached_rows and len(cache) + len(missing) > self.cached_rows:
                cache.clear()
            for i, p90 in zip(missing, predicted, strict=True):
                found[i] = p90
                if len(cache) < self.cached_rows:
                    cache[keys[i]] = p90
        return np.array(found, dtype=float)

    def predict_array(
        self, model: ModelFeatures, cpu_eff: np.ndarray, freq_eff_ghz: np.ndarray
    ) -> np.ndarray:
        """Predicted P90 (s) per node from its eq. 8 inputs.

        Each distinct input pair (or group, with ``share_within``) is predicted once, at the
        inputs of its first node, and only those few rows are built: a 100-node request of four
        node shapes asks the regressor for four rows.
        """
        inputs = np.column_stack([cpu_eff, freq_eff_ghz]).astype(float)
        if len(inputs) == 0:
            return np.zeros(0)
        keys = inputs
        if self.share_within > 0:
            keys = np.round(np.log(np.maximum(inputs, 1e-9)) / math.log1p(self.share_within))
        first, inverse = _groups(keys)
        return self._predict_rows(model, inputs[first].tolist())[inverse]

    def predict(self, model: ModelFeatures, nodes: list[NodeCapacity]) -> dict[str, float]:
        """Predicted P90 (s) by node name (see :meth:`predict_array`)."""
        cpu = np.fromiter((n.cpu_eff for n in nodes), float, len(nodes))
        freq = np.fromiter((n.freq_eff_ghz for n in nodes), float, len(nodes))
        p90 = self.predict_array(model, cpu, freq)
        return dict(zip((n.name for n in nodes), p90.tolist(), strict=True))

    def scores(self, p90_s: np.ndarray) -> np.ndarray:
        """:func:`score_array` with this scorer's error band."""
        return score_array(p90_s, self.error_band)
