"""Scores candidate nodes for a pod by predicted P90 (lower P90 → higher score, 0..10).

Shared by the HTTP extender, the stand-alone scheduler loop and the benchmark, so all three rank
nodes identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetsched.core.errors import HetschedError
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.node_features import NodeCapacity

MAX_EXTENDER_PRIORITY = 10
# kube-scheduler's framework.MaxNodeScore: a score plugin's range, to which it scales extender
# priorities (× MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY) before adding them times their weight.
MAX_NODE_SCORE = 100
# Our extender's weight in the sample KubeSchedulerConfiguration (extender.SAMPLE_SCHEDULER_CONFIG)
# and in the benchmark's "default+extender" scorer, which models that deployment.
EXTENDER_WEIGHT = 5
FREQ_LABEL = "hetsched.io/cpu-freq-ghz"
SLO_ANNOTATION = "hetsched.io/p90-slo-ms"


def scores_from_p90(p90_s: dict[str, float]) -> dict[str, int]:
    """Linear map: the lowest predicted P90 gets 10, the highest 0; all equal → all 10."""
    lo, hi = min(p90_s.values()), max(p90_s.values())
    if hi - lo <= 0:
        return dict.fromkeys(p90_s, MAX_EXTENDER_PRIORITY)
    return {n: round(MAX_EXTENDER_PRIORITY * (hi - p) / (hi - lo)) for n, p in p90_s.items()}


def weighted_extender_scores(p90_s: dict[str, float]) -> dict[str, int]:
    """What kube-scheduler adds to each node's plugin scores for our prioritize answer.

    Deployed, the extender never decides alone: the scheduler scales its 0..10 priority to the
    plugins' 0..100 and multiplies it by :data:`EXTENDER_WEIGHT`, so a node's final score is its
    plugins' sum plus this (0..500 against 0..200 for NodeResourcesFit + BalancedAllocation).
    """
    scale = EXTENDER_WEIGHT * MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    return {n: scale * s for n, s in scores_from_p90(p90_s).items()}


def capacity_from_node_object(node: dict, live: dict[str, NodeCapacity]) -> NodeCapacity:
    """A node's eq. 8 inputs: live telemetry if known, else its allocatable CPUs, idle."""
    name = node["metadata"]["name"]
    if name in live:
        return live[name]
    status = node.get("status") or {}
    cpu = (status.get("allocatable") or status.get("capacity") or {}).get("cpu")
    if cpu is None:
        raise HetschedError(f"node {name!r} reports no cpu capacity")
    cores = int(cpu[:-1]) // 1000 if str(cpu).endswith("m") else int(cpu)
    labels = node["metadata"].get("labels") or {}
    return NodeCapacity(name, cores, float(labels.get(FREQ_LABEL, 2.3)), 0.0, 0.0)


@dataclass
class P90Scorer:
    """Predicts P90 for a model on each node with a fitted regressor and scores the nodes."""

    regressor: object
    live: dict[str, NodeCapacity] = field(default_factory=dict)

    def predict(self, model: ModelFeatures, nodes: list[NodeCapacity]) -> dict[str, float]:
        """Predicted P90 (s) by node name.

        Nodes of one shape and load share a prediction, so each distinct (cpu_eff, freq_eff)
        pair is predicted once and only those few rows are built: a 100-node request of four
        node shapes asks the regressor for four rows, and per-node dicts are not allocated.
        """
        keys = [(n.cpu_eff, n.freq_eff_ghz) for n in nodes]
        unique = list(dict.fromkeys(keys))
        rows = [
            {"size_mb": model.size_mb, "flops": model.flops, "cpu_eff": cpu, "freq_eff_ghz": freq}
            for cpu, freq in unique
        ]
        preds = dict(zip(unique, self.regressor.predict_p90_s(rows).tolist(), strict=True))
        return {n.name: preds[k] for n, k in zip(nodes, keys, strict=True)}
