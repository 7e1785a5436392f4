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
  model's error); neutral nodes get :data:`~hetsched.tail.scoring.NEUTRAL_SCORE`. Each entry of
  the request is scored on its own (kube-scheduler names each node once).
* Fail-open: an unknown model, a bad SLO or a failing regressor gives neutral scores and filters
  nothing, with ``Error`` empty, so scheduling proceeds as without the extender (and it does not
  depend on ``ignorable: true``, though the sample configuration sets it for outages).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.tail.catalog import ModelCatalog
from hetsched.tail.extender_api import (
    ExtenderArgs,
    Node,
    NodeList,
    NodeMeta,
    NodeResources,
    NodeStatus,
    ObjectMeta,
    Pod,
)
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.models import MODEL_ANNOTATION, UnknownModelError, features_for_annotations
from hetsched.tail.scoring import (
    EXTENDER_WEIGHT,
    NEUTRAL_SCORE,
    SLO_ANNOTATION,
    P90Scorer,
    idle_capacity,
)
from hetsched.tail.telemetry import EMPTY_TABLE, NodeTelemetry, TelemetryView

EMPTY_VIEW = TelemetryView(EMPTY_TABLE, 0.0)
# Nodes whose eq. 8 inputs agree within 5 % share a prediction (P90Scorer.share_within).
SHARE_WITHIN = 0.05
# Regressor rows whose prediction the extender's scorer remembers (P90Scorer.cached_rows): a
# 5,000-node cluster under live load asks a few hundred per model per telemetry refresh.
CACHED_ROWS = 2**16
# Distinct (cpu, clock label) pairs of Node objects remembered; a cluster has a handful.
IDLE_SHAPE_CACHE = 1024


@dataclass
class Outcome:
    """What one request fell back on, for the service's metrics: the model fallback's reason
    (None if the model was scored) and the neutral nodes by why."""

    model_fallback: str | None = None
    neutral_nodes: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Candidates:
    """The scorable nodes of a request: their positions in the request (ascending) and, per
    node, (cpu_eff, freq_eff_ghz, cores, freq_ghz), i.e. eq. 8 now and when idle, as rows of a
    (nodes, 4) array."""

    positions: np.ndarray
    columns: np.ndarray


@dataclass
class Extender:
    """Filter and prioritize for one regressor, catalogue and (optional) telemetry cache."""

    scorer: P90Scorer
    catalog: ModelCatalog
    telemetry: NodeTelemetry | None = None
    # (cpu type, cpu, clock label) of a Node object → its row in _idle_rows, or why it has none
    _idle_keys: dict[tuple, int | str] = field(default_factory=dict, repr=False)
    # (cores, freq_ghz, cores, freq_ghz): eq. 8 inputs of an idle node
    _idle_rows: list[tuple[float, float, float, float]] = field(default_factory=list, repr=False)

    def _candidates(self, args: ExtenderArgs, names: list[str], outcome: Outcome) -> Candidates:
        """The scorable nodes among ``names`` (the request's, in order); the others are counted
        in ``outcome`` as neutral.

        The hot path of a 5,000-node request: one dict probe per name into the node cache's
        table (:class:`~hetsched.tail.telemetry.NodeTable`), the rest vectorised. Only Node
        objects without a reading are looked at one by one.
        """
        view = self.telemetry.view() if self.telemetry is not None else EMPTY_VIEW
        rows, fresh = view.fresh_rows(names)
        known = rows >= 0
        neutral = outcome.neutral_nodes
        stale = int(np.count_nonzero(known)) - int(np.count_nonzero(fresh))
        if stale:
            neutral["stale"] += stale
        positions = np.flatnonzero(fresh)
        columns = view.table.columns[rows[positions]]
        unknown = np.flatnonzero(~known).tolist()
        if not unknown:
            return Candidates(positions, columns)
        if args.Nodes is None:
            neutral["unknown_node"] += len(unknown)
            return Candidates(positions, columns)
        if len(self._idle_keys) >= IDLE_SHAPE_CACHE:  # not a handful: start afresh
            self._idle_keys.clear()
            self._idle_rows.clear()
        items = args.Nodes.items
        idle_positions: list[int] = []
        idle_ids: list[int] = []
        for i in unknown:
            shape = self._idle_shape(items[i])
            if isinstance(shape, str):
                neutral[shape] += 1
            else:
                idle_positions.append(i)
                idle_ids.append(shape)
        if not idle_positions:
            return Candidates(positions, columns)
        merged = np.concatenate([positions, np.array(idle_positions, dtype=np.int64)])
        order = np.argsort(merged, kind="stable")  # back to request order
        idle_columns = np.array(self._idle_rows, dtype=float)[idle_ids]
        stacked = np.vstack([columns, idle_columns])
        return Candidates(merged[order], stacked[order])

    def _idle_shape(self, node: Node) -> int | str:
        """The row of the node's idle eq. 8 inputs in ``_idle_rows``, or why it has none.

        Node objects repeat a few (cpu, clock label) pairs, so each pair is parsed once, and a
        5,000-node request gathers its rows from the small table instead of building one tuple
        per node into an array.
        """
        cpu = node.status.cpu() if node.status is not None else None
        if cpu is None:
            return "no_capacity"
        labels = node.metadata.labels
        freq = labels.cpu_freq_ghz if labels is not None else None
        key = (type(cpu), cpu, freq)
        shape = self._idle_keys.get(key)
        if shape is None:
            try:
                idle = idle_capacity("", cpu, labels.as_map() if labels is not None else None)
                shape = len(self._idle_rows)
                self._idle_rows.append((idle.cores, idle.freq_ghz, idle.cores, idle.freq_ghz))
            except HetschedError:
                shape = "bad_capacity"
            self._idle_keys[key] = shape
        return shape

    def _model(self, args: ExtenderArgs, outcome: Outcome) -> ModelFeatures | None:
        try:
            return features_for_annotations(args.annotations(), self.catalog)
        except UnknownModelError as error:
            outcome.model_fallback = error.reason
            return None

    def _predict(
        self, model: ModelFeatures, cpu_eff: np.ndarray, freq: np.ndarray, outcome: Outcome
    ) -> np.ndarray | None:
        try:
            p90 = self.scorer.predict_array(model, cpu_eff, freq)
        except Exception:  # a broken regressor must not break scheduling (fail-open)
            outcome.model_fallback = "prediction_failed"
            return None
        if not np.isfinite(p90).all():
            outcome.model_fallback = "prediction_failed"
            return None
        return p90

    def prioritize_scores(self, args: ExtenderArgs) -> tuple[list[str], np.ndarray, Outcome]:
        """The request's node names, a score per name (request order), what it fell back on."""
        outcome = Outcome()
        names = args.node_names()
        scores = np.full(len(names), NEUTRAL_SCORE, dtype=np.int64)
        model = self._model(args, outcome)
        if model is not None:
            found = self._candidates(args, names, outcome)
            columns = found.columns
            p90 = self._predict(model, columns[:, 0], columns[:, 1], outcome)
            if p90 is not None and len(p90):
                scores[found.positions] = self.scorer.scores(p90)
        return names, scores, outcome

    def prioritize(self, args: ExtenderArgs) -> tuple[list[dict], Outcome]:
        """HostPriorityList in request order, and what it fell back on."""
        names, scores, outcome = self.prioritize_scores(args)
        priorities = [
            {"Host": name, "Score": score}
            for name, score in zip(names, scores.tolist(), strict=True)
        ]
        return priorities, outcome

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
        names = args.node_names()
        found = self._candidates(args, names, outcome)
        columns = found.columns
        live = self._predict(model, columns[:, 0], columns[:, 1], outcome)
        if live is None:
            return {}, {}
        over = np.flatnonzero(live * 1e3 > slo_ms)
        idle = self._predict(model, columns[over, 2], columns[over, 3], outcome)
        if idle is None:
            return {}, {}
        failed, unresolvable = {}, {}
        for i, idle_s in zip(over.tolist(), idle.tolist(), strict=True):
            name, live_ms, idle_ms = names[found.positions[i]], live[i] * 1e3, idle_s * 1e3
            if idle_ms > slo_ms:
                unresolvable[name] = f"predicted P90 {idle_ms:.1f} ms even idle > SLO {slo_ms:g} ms"
            else:
                failed[name] = f"predicted P90 {live_ms:.1f} ms under load > SLO {slo_ms:g} ms"
        return failed, unresolvable

    def filter(
        self, args: ExtenderArgs, raw_items: Sequence[object] | None
    ) -> tuple[dict, Outcome]:
        """ExtenderFilterResult; ``raw_items`` are the request's Node objects as sent (their JSON
        text from :func:`~hetsched.tail.extender_api.decode_args_with_items`), returned unchanged
        for the kept nodes (kube-scheduler uses them for its later plugins)."""
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
    return ExtenderArgs(
        Pod=Pod(metadata=ObjectMeta(name="warm-up", annotations={MODEL_ANNOTATION: key})),
        Nodes=NodeList(
            items=[
                Node(
                    metadata=NodeMeta(name="warm-up"),
                    status=NodeStatus(allocatable=NodeResources(cpu="1")),
                )
            ]
        ),
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
