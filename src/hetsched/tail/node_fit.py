"""Resource fit of a pod on a node, as kube-scheduler's NodeResourcesFit filter decides it.

The stand-alone scheduler (:mod:`hetsched.tail.scheduler_loop`) must never bind a pod to a node
that cannot hold it: a node's *allocatable* resources minus the requests of the pods already bound
to it (and not terminated) must cover the pod's requests, for every resource the pod requests
(CPU, memory, extended resources) and for the pod count (``allocatable.pods``, one per pod).

A pod's effective request follows Kubernetes (KEP-753 sidecars included): regular containers run
together and add up; init containers run one at a time before them, each beside the restartable
init containers ("sidecars", ``restartPolicy: Always``) started before it; sidecars keep running
beside the regular containers; the pod's ``overhead`` is added on top. Quantities are parsed by the
``kubernetes`` client's parser (:mod:`hetsched.tail.quantities`). All functions are pure and take
the API's JSON objects (dicts) as they come from the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from hetsched.core.errors import HetschedError
from hetsched.tail.quantities import parse_quantity_value

PODS_RESOURCE = "pods"
CPU_RESOURCE = "cpu"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
Resources = dict[str, float]


def _amounts(quantities: Mapping[str, Any]) -> Resources:
    """Parsed quantities by resource name; :class:`HetschedError` names a malformed one."""
    parsed: Resources = {}
    for name, value in quantities.items():
        if not isinstance(value, str | int | float):
            raise HetschedError(f"resource {str(name)[:40]!r}: not a Kubernetes quantity")
        parsed[name] = parse_quantity_value(value)
    return parsed


def container_requests(container: Mapping[str, Any]) -> Resources:
    """One container's requests; a resource with a limit but no request requests its limit (the
    API server's defaulting, repeated for objects that did not pass through it)."""
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return _amounts(amounts)


def add_resources(a: Mapping[str, float], b: Mapping[str, float]) -> Resources:
    """Resource-wise sum."""
    return {name: a.get(name, 0.0) + b.get(name, 0.0) for name in a.keys() | b.keys()}


def _union_max(a: Resources, b: Resources) -> Resources:
    return {name: max(a.get(name, 0.0), b.get(name, 0.0)) for name in a.keys() | b.keys()}


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """The pod's effective requests, without the pod count (see the module docstring).

    Raises:
        HetschedError: A quantity in the pod is malformed.
    """
    spec = pod.get("spec") or {}
    running: Resources = {}
    for container in spec.get("containers") or []:
        running = add_resources(running, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = add_resources(sidecars, requests)
            init_peak = _union_max(init_peak, sidecars)
        else:
            init_peak = _union_max(init_peak, add_resources(requests, sidecars))
    total = _union_max(add_resources(running, sidecars), init_peak)
    return add_resources(total, _amounts(spec.get("overhead") or {}))


def is_terminated(pod: Mapping[str, Any]) -> bool:
    """Whether the pod has finished (its resources are free again)."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def bound_node(pod: Mapping[str, Any]) -> str | None:
    """The node the pod is bound to, or None while it is pending."""
    return (pod.get("spec") or {}).get("nodeName") or None


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    """The node's allocatable resources (its capacity if it reports none).

    Raises:
        HetschedError: A quantity in the node's status is malformed.
    """
    status = node.get("status") or {}
    return _amounts(status.get("allocatable") or status.get("capacity") or {})


def requested_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, Resources]:
    """Per node, the summed requests (and ``pods`` count) of the pods bound to it and running.

    A bound pod whose own requests are malformed cannot have been admitted by a real API server;
    it still counts as one pod.
    """
    used: dict[str, Resources] = {}
    for pod in pods:
        node = bound_node(pod)
        if node is None or is_terminated(pod):
            continue
        total = used.get(node, {})
        with contextlib.suppress(HetschedError):
            total = add_resources(total, pod_requests(pod))
        used[node] = add_resources(total, {PODS_RESOURCE: 1.0})
    return used


def insufficient_resources(
    request: Mapping[str, float], allocatable: Mapping[str, float], used: Mapping[str, float]
) -> list[str]:
    """The resources the node lacks for the pod, sorted; empty if it fits.

    Zero requests need nothing; the pod itself always needs one more ``pods`` slot.
    """
    need = {name: amount for name, amount in request.items() if amount > 0}
    need[PODS_RESOURCE] = need.get(PODS_RESOURCE, 0.0) + 1
    return sorted(
        name
        for name, amount in need.items()
        if used.get(name, 0.0) + amount > allocatable.get(name, 0.0) + 1e-9
    )


def free_cpu_fraction(allocatable: Mapping[str, float], used: Mapping[str, float]) -> float:
    """Share of the node's allocatable CPU not requested by bound pods (0 if it has none)."""
    cores = allocatable.get(CPU_RESOURCE, 0.0)
    return max(0.0, 1.0 - used.get(CPU_RESOURCE, 0.0) / cores) if cores > 0 else 0.0
