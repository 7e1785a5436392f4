"""Which feasible node the scheduler loop binds a pod to: the paper's predicted P90, then spread.

The paper (Sec. IV) places a pod on the node with the lowest predicted P90 latency. The loop ranks
the feasible nodes (:func:`hetsched.tail.node_filter.filter_nodes`) by, in order:

1. fewest untolerated ``PreferNoSchedule`` taints (Kubernetes' "try to avoid": such a node is only
   used when no better one fits);
2. highest 0-10 score of the predicted P90 (:meth:`hetsched.tail.scoring.P90Scorer.scores`, the
   extender's scale): nodes whose predictions lie within one error band of the best share the top
   score, since the model cannot tell them apart;
3. most unrequested CPU (kube-scheduler's LeastAllocated), so equally fast nodes fill evenly instead
   of stacking every pod on the alphabetically first;
4. lower predicted P90, then the name (a deterministic answer).

A pod whose model is not in the catalogue (``model`` None) and nodes whose capacity cannot be read
get no prediction: every node scores neutrally and rules 1, 3 and 4 decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.node_filter import FeasibleNode
from hetsched.tail.scoring import P90Scorer, capacity_from_node_object


@dataclass(frozen=True)
class Placement:
    """The chosen node, its predicted P90 (s; None without a prediction) and its 0-10 score."""

    node: str
    p90_s: float | None
    score: int


def predicted_p90_s(
    feasible: Sequence[FeasibleNode], model: ModelFeatures | None, scorer: P90Scorer
) -> np.ndarray:
    """Predicted P90 (s) per feasible node; ``inf`` where there is no prediction."""
    p90 = np.full(len(feasible), math.inf)
    if model is None:
        return p90
    rows: list[int] = []
    cpu_eff: list[float] = []
    freq_eff: list[float] = []
    for index, candidate in enumerate(feasible):
        try:
            capacity = capacity_from_node_object(dict(candidate.node), scorer.live)
        except HetschedError:
            continue
        rows.append(index)
        cpu_eff.append(capacity.cpu_eff)
        freq_eff.append(capacity.freq_eff_ghz)
    if rows:
        p90[rows] = scorer.predict_array(model, np.array(cpu_eff), np.array(freq_eff))
    return p90


def choose_node(
    feasible: Sequence[FeasibleNode], model: ModelFeatures | None, scorer: P90Scorer
) -> Placement:
    """The best of the (non-empty) feasible nodes by the ranking of the module docstring."""
    if not feasible:
        raise HetschedError("no feasible node to choose from")
    p90 = predicted_p90_s(feasible, model, scorer)
    scores = scorer.scores(p90).tolist()
    best = min(
        range(len(feasible)),
        key=lambda i: (
            feasible[i].avoid_taints,
            -scores[i],
            -feasible[i].free_cpu_fraction,
            p90[i],
            feasible[i].name,
        ),
    )
    p90_s = float(p90[best]) if math.isfinite(p90[best]) else None
    return Placement(feasible[best].name, p90_s, int(scores[best]))
