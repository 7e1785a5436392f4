"""Where a pod may go besides resources: cordon, taints and tolerations, nodeSelector, affinity.

The same rules as kube-scheduler's filter plugins, so the stand-alone scheduler
(:mod:`hetsched.tail.scheduler_loop`) places pods only where the default scheduler could:

* **NodeUnschedulable**: a cordoned node (``spec.unschedulable``) takes no new pods unless the pod
  tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint.
* **TaintToleration**: every ``NoSchedule`` and ``NoExecute`` taint of the node must be tolerated;
  ``PreferNoSchedule`` taints only count against the node (a preference, see
  :func:`untolerated_taints`).
* **NodeAffinity**: the pod's ``nodeSelector`` (all pairs equal) and its required node affinity
  (``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``: the terms are ORed, a
  term's expressions ANDed; operators In, NotIn, Exists, DoesNotExist, Gt, Lt; ``matchFields`` on
  ``metadata.name``). An empty or malformed term matches no node, as in Kubernetes.

Pure functions over the API's JSON objects (dicts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
FILTER_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})
NODE_NAME_FIELD = "metadata.name"
Obj = Mapping[str, Any]


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether one toleration tolerates one taint (Kubernetes' ``Toleration.ToleratesTaint``): an
    empty effect or key matches any; operator ``Exists`` matches any value, ``Equal`` (the
    default) the same value."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _tolerations(pod: Obj) -> Sequence[Obj]:
    return (pod.get("spec") or {}).get("tolerations") or []


def untolerated_taints(pod: Obj, node: Obj, effects: frozenset[str]) -> list[Obj]:
    """The node's taints with one of ``effects`` that none of the pod's tolerations tolerates.

    With :data:`FILTER_EFFECTS` a non-empty answer rules the node out; with
    ``{PREFER_NO_SCHEDULE}`` its length is how much the node should be avoided.
    """
    tolerations = _tolerations(pod)
    return [
        taint
        for taint in (node.get("spec") or {}).get("taints") or []
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations)
    ]


def is_cordoned_for(pod: Obj, node: Obj) -> bool:
    """Whether the node is cordoned and the pod does not tolerate that."""
    if not (node.get("spec") or {}).get("unschedulable"):
        return False
    taint = {"key": UNSCHEDULABLE_TAINT_KEY, "effect": NO_SCHEDULE}
    return not any(tolerates(t, taint) for t in _tolerations(pod))


def _labels(node: Obj) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def matches_node_selector(pod: Obj, node: Obj) -> bool:
    """Whether the node carries every label of the pod's ``nodeSelector``."""
    labels = _labels(node)
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def _as_int(text: Any) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def matches_expression(expression: Obj, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` requirement against a node's labels.

    In/NotIn need values, Exists/DoesNotExist none, Gt/Lt exactly one integer (compared with the
    label as an integer); a requirement breaking that matches nothing.
    """
    key, operator = expression.get("key"), expression.get("operator")
    if not isinstance(key, str):
        return False
    values = list(expression.get("values") or [])
    present = key in labels
    if operator in ("In", "NotIn"):
        if not values:
            return False
        inside = present and labels[key] in values
        return inside if operator == "In" else not inside
    if operator in ("Exists", "DoesNotExist"):
        return not values and present == (operator == "Exists")
    if operator in ("Gt", "Lt"):
        bound = _as_int(values[0]) if len(values) == 1 else None
        value = _as_int(labels[key]) if present else None
        if bound is None or value is None:
            return False
        return value > bound if operator == "Gt" else value < bound
    return False


def matches_field(expression: Obj, node: Obj) -> bool:
    """One ``matchFields`` requirement: only ``metadata.name`` with In or NotIn and one value."""
    values = list(expression.get("values") or [])
    if expression.get("key") != NODE_NAME_FIELD or len(values) != 1:
        return False
    name = (node.get("metadata") or {}).get("name")
    if expression.get("operator") == "In":
        return name == values[0]
    return expression.get("operator") == "NotIn" and name != values[0]


def matches_term(term: Obj, node: Obj) -> bool:
    """A node selector term: all its expressions and fields hold; an empty term matches none."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = _labels(node)
    return all(matches_expression(e, labels) for e in expressions) and all(
        matches_field(f, node) for f in fields
    )


def matches_required_affinity(pod: Obj, node: Obj) -> bool:
    """Whether the node satisfies the pod's required node affinity (True if it has none)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(matches_term(term, node) for term in required.get("nodeSelectorTerms") or [])
