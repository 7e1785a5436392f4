"""The feasible nodes of a pod, and kube-scheduler's message when there are none.

Runs the filters in kube-scheduler's default plugin order (NodeUnschedulable, TaintToleration,
NodeAffinity, NodeResourcesFit; :mod:`hetsched.tail.node_constraints`,
:mod:`hetsched.tail.node_fit`); a node is out at its first failing filter, with that filter's
reason(s), worded as kube-scheduler words them so an operator reading the ``FailedScheduling``
Event sees the familiar "0/3 nodes are available: 1 Insufficient cpu, ...".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hetsched.core.errors import HetschedError
from hetsched.tail.node_constraints import (
    FILTER_EFFECTS,
    PREFER_NO_SCHEDULE,
    is_cordoned_for,
    matches_node_selector,
    matches_required_affinity,
    untolerated_taints,
)
from hetsched.tail.node_fit import (
    PODS_RESOURCE,
    Resources,
    free_cpu_fraction,
    insufficient_resources,
    node_allocatable,
)

UNSCHEDULABLE_REASON = "node(s) were unschedulable"
AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
INVALID_NODE_REASON = "node(s) had invalid allocatable resources"
TOO_MANY_PODS_REASON = "Too many pods"


@dataclass(frozen=True)
class FeasibleNode:
    """A node the pod fits on: the Node object, the share of its CPU still unrequested, and how
    many of its PreferNoSchedule taints the pod does not tolerate (to avoid it if possible)."""

    node: Mapping[str, Any]
    name: str
    free_cpu_fraction: float
    avoid_taints: int


def _taint_reason(taint: Mapping[str, Any]) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"


def node_failures(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    request: Resources,
    allocatable: Resources,
    used: Resources,
) -> list[str]:
    """Why the pod cannot go to the node (empty: it can), from the first failing filter."""
    if is_cordoned_for(pod, node):
        return [UNSCHEDULABLE_REASON]
    taints = untolerated_taints(pod, node, FILTER_EFFECTS)
    if taints:
        return [_taint_reason(taints[0])]
    if not (matches_node_selector(pod, node) and matches_required_affinity(pod, node)):
        return [AFFINITY_REASON]
    return [
        TOO_MANY_PODS_REASON if name == PODS_RESOURCE else f"Insufficient {name}"
        for name in insufficient_resources(request, allocatable, used)
    ]


def filter_nodes(
    pod: Mapping[str, Any],
    request: Resources,
    nodes: Sequence[Mapping[str, Any]],
    used_by_node: Mapping[str, Resources],
) -> tuple[list[FeasibleNode], Counter[str]]:
    """The nodes the pod (whose effective requests are ``request``) fits on, and per reason how
    many nodes it ruled out. ``used_by_node`` is :func:`~hetsched.tail.node_fit.requested_by_node`
    of the pods already bound."""
    feasible: list[FeasibleNode] = []
    reasons: Counter[str] = Counter()
    for node in nodes:
        name = node["metadata"]["name"]
        used = used_by_node.get(name, {})
        try:
            allocatable = node_allocatable(node)
        except HetschedError:
            reasons[INVALID_NODE_REASON] += 1
            continue
        failures = node_failures(pod, node, request, allocatable, used)
        if failures:
            reasons.update(failures)
            continue
        avoid = len(untolerated_taints(pod, node, frozenset({PREFER_NO_SCHEDULE})))
        feasible.append(FeasibleNode(node, name, free_cpu_fraction(allocatable, used), avoid))
    return feasible, reasons


def unschedulable_message(node_count: int, reasons: Counter[str]) -> str:
    """kube-scheduler's summary: ``0/N nodes are available: <count> <reason>, ...``."""
    if node_count == 0:
        return "0/0 nodes are available: no nodes in the cluster."
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"0/{node_count} nodes are available: {parts}."
