"""Kubernetes scheduler extender logic: filter by predicted P90 against the pod's SLO, prioritize.

The HTTP service around it is :mod:`hetsched.tail.extender_app`. Semantics (the operator's guide is
docs/tail/extender.md):

* The pod names its model with ``hetsched.io/model``, a key of the model-feature catalogue, and
  may set an SLO ``hetsched.io/p90-slo-ms``. Nothing else in the request is trusted or followed.
* A node's eq. 8 capacity comes from the telemetry cache (live load) if it has a fresh reading;
  a stale reading (older than the TTL) makes the node *neutral*. Without any reading, a full Node
  object gives its allocatable CPU, idle; a bare name (``nodeCacheCapable: true``) is neutral.
* Filter: a node whose predicted P90 exceeds the SLO fails. If it would exceed it even idle, no
  preemption can help: it goes to ``FailedAndUnresolvableNodes``; otherwise to ``FailedNodes``.
  Neutral nodes are kept.
* Prioritize: scores 0..10 by :func:`~hetsched.tail.scoring.scores_from_p90` (dead band of the
  model's error); neutral nodes get :data:`~hetsched.tail.scoring.NEUTRAL_SCORE`.
* Fail-open: an unknown model, a bad SLO or a failing regressor gives neutral scores and filters
  nothing, with ``Error`` empty, so scheduling proceeds as without the extender (and it does not
  depend on ``ignorable: true``, though the sample configuration sets it for outages).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from hetsched.core.errors import HetschedError
from hetsched.tail.catalog import ModelCatalog
from hetsched.tail.extender_api import ExtenderArgs, Node
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.models import MODEL_ANNOTATION, UnknownModelError, features_for_annotations
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.scoring import (
    EXTENDER_WEIGHT,
    NEUTRAL_SCORE,
    SLO_ANNOTATION,
    P90Scorer,
    idle_capacity,
)
from hetsched.tail.telemetry import NodeTelemetry, TelemetryView

EMPTY_VIEW = TelemetryView({}, 0.0)


@dataclass
class Outcome:
    """What one request fell back on, for the service's metrics: the model fallback's reason
    (None if the model was scored) and the neutral nodes by why."""

    model_fallback: str | None = None
    neutral_nodes: Counter[str] = field(default_factory=Counter)


@dataclass
class Extender:
    """Filter and prioritize for one regressor, catalogue and (optional) telemetry cache."""

    scorer: P90Scorer
    catalog: ModelCatalog
    telemetry: NodeTelemetry | None = None

    def _capacities(self, args: ExtenderArgs, outcome: Outcome) -> list[NodeCapacity]:
        """The scorable nodes' capacities; the others are counted in ``outcome`` as neutral."""
        view = self.telemetry.view() if self.telemetry is not None else EMPTY_VIEW
        scorable: list[NodeCapacity] = []
        nodes: list[Node] | list[str] = args.Nodes.items if args.Nodes else args.NodeNames or []
        for node in nodes:
            name = node if isinstance(node, str) else node.metadata.name
            live, stale = view.lookup(name)
            if live is not None and not stale:
                scorable.append(live)
                continue
            if stale:
                why: str | None = "stale"
            elif isinstance(node, Node):
                why = self._idle(node, scorable)
            else:
                why = "unknown_node"
            if why is not None:
                outcome.neutral_nodes[why] += 1
        return scorable

    @staticmethod
    def _idle(node: Node, scorable: list[NodeCapacity]) -> str | None:
        """Adds the node's idle capacity from its object; the neutral reason if it has none."""
        cpu = node.status.cpu() if node.status is not None else None
        if cpu is None:
            return "no_capacity"
        try:
            scorable.append(idle_capacity(node.metadata.name, cpu, node.metadata.labels))
        except HetschedError:
            return "bad_capacity"
        return None

    def _model(self, args: ExtenderArgs, outcome: Outcome) -> ModelFeatures | None:
        try:
            return features_for_annotations(args.annotations(), self.catalog)
        except UnknownModelError as error:
            outcome.model_fallback = error.reason
            return None

    def _predict(
        self, model: ModelFeatures, nodes: list[NodeCapacity], outcome: Outcome
    ) -> dict[str, float] | None:
        try:
            p90 = self.scorer.predict(model, nodes)
        except Exception:  # a broken regressor must not break scheduling (fail-open)
            outcome.model_fallback = "prediction_failed"
            return None
        if not all(math.isfinite(p) for p in p90.values()):
            outcome.model_fallback = "prediction_failed"
            return None
        return p90

    def prioritize(self, args: ExtenderArgs) -> tuple[list[dict], Outcome]:
        """HostPriorityList in request order, and what it fell back on."""
        outcome = Outcome()
        names = args.node_names()
        scores = dict.fromkeys(names, NEUTRAL_SCORE)
        model = self._model(args, outcome)
        if model is not None:
            nodes = self._capacities(args, outcome)
            p90 = self._predict(model, nodes, outcome)
            if p90:
                scores.update(self.scorer.scores(p90))
        return [{"Host": name, "Score": scores[name]} for name in names], outcome

    def _slo_ms(self, args: ExtenderArgs, outcome: Outcome) -> float | None:
        text = args.annotations().get(SLO_ANNOTATION)
        if text is None:
            return None
        try:
            slo_ms = float(text)
        except ValueError:
            slo_ms = math.nan
        if not math.isfinite(slo_ms) or slo_ms <= 0:
            outcome.model_fallback = "bad_slo"
            return None
        return slo_ms

    def failures(
        self, args: ExtenderArgs, outcome: Outcome
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(FailedNodes, FailedAndUnresolvableNodes) for the pod's SLO; both empty without one."""
        slo_ms = self._slo_ms(args, outcome)
        model = self._model(args, outcome) if slo_ms is not None else None
        if slo_ms is None or model is None:
            return {}, {}
        nodes = self._capacities(args, outcome)
        live = self._predict(model, nodes, outcome)
        if not live:
            return {}, {}
        over = [n for n in nodes if live[n.name] * 1e3 > slo_ms]
        idle = self._predict(
            model, [NodeCapacity(n.name, n.cores, n.freq_ghz, 0, 0) for n in over], outcome
        )
        if idle is None:
            return {}, {}
        failed, unresolvable = {}, {}
        for node in over:
            p_ms, idle_ms = live[node.name] * 1e3, idle[node.name] * 1e3
            if idle_ms > slo_ms:
                unresolvable[node.name] = (
                    f"predicted P90 {idle_ms:.1f} ms even idle > SLO {slo_ms:g} ms"
                )
            else:
                failed[node.name] = f"predicted P90 {p_ms:.1f} ms under load > SLO {slo_ms:g} ms"
        return failed, unresolvable

    def filter(self, args: ExtenderArgs, raw_items: list | None) -> tuple[dict, Outcome]:
        """ExtenderFilterResult; ``raw_items`` are the request's Node objects as sent, returned
        unchanged for the kept nodes (kube-scheduler uses them for its later plugins)."""
        outcome = Outcome()
        failed, unresolvable = self.failures(args, outcome)
        dropped = failed.keys() | unresolvable.keys()
        result: dict = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
        if args.Nodes is not None and raw_items is not None:
            kept = [
                raw
                for raw, node in zip(raw_items, args.Nodes.items, strict=True)
                if node.metadata.name not in dropped
            ]
            result["Nodes"] = {"metadata": {}, "items": kept}
        else:
            result["NodeNames"] = [n for n in args.node_names() if n not in dropped]
        return result, outcome


def warm_up_args(key: str) -> ExtenderArgs:
    """A one-node prioritize request for catalogue key ``key``, as kube-scheduler shapes it."""
    return ExtenderArgs.model_validate(
        {
            "Pod": {"metadata": {"name": "warm-up", "annotations": {MODEL_ANNOTATION: key}}},
            "Nodes": {
                "items": [
                    {"metadata": {"name": "warm-up"}, "status": {"allocatable": {"cpu": "1"}}}
                ]
            },
        }
    )


def scheduler_config(url_prefix: str, node_cache_capable: bool) -> str:
    """The ``extenders`` entry of a KubeSchedulerConfiguration for this extender."""
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
extenders:
  - urlPrefix: "{url_prefix}"
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: {EXTENDER_WEIGHT}
    nodeCacheCapable: {str(node_cache_capable).lower()}
    enableHTTPS: {str(url_prefix.startswith("https")).lower()}
    ignorable: true
    httpTimeout: 5s
"""
