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


def scores_from_p90(
    p90_s: Mapping[str, float], error_band: float = DEFAULT_ERROR_BAND
) -> dict[str, int]:
    """Priority 0..10 per node by the dead-band scaling of the module docstring.

    A prediction that is not finite (a broken model) scores 0 unless every node's is, in which
    case all score :data:`NEUTRAL_SCORE`.
    """
    if error_band <= 0:
        raise HetschedError(f"the error band must be positive, got {error_band}")
    logs = {n: math.log1p(max(p, 0.0) * 1e3) for n, p in p90_s.items() if math.isfinite(p)}
    if not logs:
        return dict.fromkeys(p90_s, NEUTRAL_SCORE)
    best = min(logs.values())
    scores = dict.fromkeys(p90_s, 0)
    for name, x in logs.items():
        bands = (x - best) / error_band
        scores[name] = MAX_EXTENDER_PRIORITY - min(MAX_EXTENDER_PRIORITY, math.floor(bands))
    return scores


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


class P90Predictor(Protocol):
    """A fitted regressor (:class:`~hetsched.tail.regressors.FittedRegressor`)."""

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray: ...


@dataclass
class P90Scorer:
    """Predicts P90 for a model on each node with a fitted regressor and scores the nodes."""

    regressor: P90Predictor
    live: dict[str, NodeCapacity] = field(default_factory=dict)
    error_band: float = DEFAULT_ERROR_BAND

    def predict(self, model: ModelFeatures, nodes: list[NodeCapacity]) -> dict[str, float]:
        """Predicted P90 (s) by node name.

        Nodes of one shape and load share a prediction, so each distinct (cpu_eff, freq_eff)
        pair is predicted once and only those few rows are built: a 100-node request of four
        node shapes asks the regressor for four rows, and per-node dicts are not allocated.
        """
        keys = [(n.cpu_eff, n.freq_eff_ghz) for n in nodes]
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        rows = [
            {"size_mb": model.size_mb, "flops": model.flops, "cpu_eff": cpu, "freq_eff_ghz": freq}
            for cpu, freq in unique
        ]
        preds = dict(zip(unique, self.regressor.predict_p90_s(rows).tolist(), strict=True))
        return {n.name: preds[k] for n, k in zip(nodes, keys, strict=True)}

    def scores(self, p90_s: Mapping[str, float]) -> dict[str, int]:
        """:func:`scores_from_p90` with this scorer's error band."""
        return scores_from_p90(p90_s, self.error_band)
