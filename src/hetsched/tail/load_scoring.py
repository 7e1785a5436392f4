"""Load-aware node scores, the simple rules an operator tries before a learned P90 model.

All three read the same measured load the P90 scorers see (the observer's eqs. 6-8 per node) and
the pod's CPU request; a higher score wins. Formulas written from the scheduler-plugins
documentation of Trimaran (kubernetes-sigs/scheduler-plugins, ``pkg/trimaran``, KEP 61
"Trimaran: real load aware scheduling"), CPU only (memory load is not simulated):

- ``least-loaded``: score = −(run-queue per core) where measured, else −U_C: the emptiest node
  wins. The run queue per core keeps growing past 100 % utilisation, so this rule still tells a
  node with one busy core from one with a run queue of 40; the two Trimaran rules below use
  utilisation, as upstream does.
- ``load-risk`` (LoadVariationRiskBalancing): μ = U_C + request / cores (the node's mean measured
  utilisation plus the pod), σ = the standard deviation of the measured utilisation over the
  window; risk = (μ + margin · σ^(1/sensitivity)) / 2 with margin = sensitivity = 1; score =
  (1 − risk) · 100. The simulated load is constant over a window, so σ = 0 there.
- ``target-load`` (TargetLoadPacking): U = 100 · (U_C + request / cores); with target T = 40 %,
  score = (100 − T) · U / T + T for U ≤ T (fill nodes up to the target: the fuller, the better),
  T · (100 − U) / (100 − T) for T < U ≤ 100 (then spread), 0 above 100.
"""

from __future__ import annotations

from collections.abc import Sequence

from hetsched.tail.node_features import NodeCapacity

MAX_SCORE = 100.0
TARGET_UTILISATION_PERCENT = 40.0  # TargetLoadPacking's default target
RISK_MARGIN = 1.0  # LoadVariationRiskBalancing's defaults
RISK_SENSITIVITY = 1.0


def least_loaded_scores(caps: Sequence[NodeCapacity]) -> list[float]:
    """Minus each node's run queue per core (or, where not measured, its utilisation U_C)."""
    return [-(c.runq_per_core if c.runq_per_core is not None else c.u_cores) for c in caps]


def load_risk_scores(
    caps: Sequence[NodeCapacity], request_cores: float, load_std: Sequence[float] | None = None
) -> list[float]:
    """LoadVariationRiskBalancing: (1 − risk) · 100 per node (module docstring); ``load_std``
    is each node's standard deviation of U_C over the window (0 where not given)."""
    stds = load_std if load_std is not None else [0.0] * len(caps)
    scores = []
    for cap, std in zip(caps, stds, strict=True):
        mu = min(cap.u_cores + request_cores / cap.cores, 1.0)
        risk = (mu + RISK_MARGIN * max(std, 0.0) ** (1.0 / RISK_SENSITIVITY)) / 2
        scores.append((1.0 - min(risk, 1.0)) * MAX_SCORE)
    return scores


def target_load_score(
    utilisation_percent: float, target: float = TARGET_UTILISATION_PERCENT
) -> float:
    """TargetLoadPacking's score of a node whose predicted utilisation is that percentage."""
    u = utilisation_percent
    if u > MAX_SCORE:
        return 0.0
    if u <= target:
        return (MAX_SCORE - target) * u / target + target
    return target * (MAX_SCORE - u) / (MAX_SCORE - target)


def target_load_scores(caps: Sequence[NodeCapacity], request_cores: float) -> list[float]:
    """:func:`target_load_score` of every node with the pod's request added to its load."""
    return [target_load_score(100.0 * (c.u_cores + request_cores / c.cores)) for c in caps]
