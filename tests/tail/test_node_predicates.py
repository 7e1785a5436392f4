"""Table-driven checks of the scheduler loop's pure filters: fit, cordon, taints, selectors,
affinity operators, and the FailedScheduling summary."""

from __future__ import annotations

from collections import Counter

import pytest

from hetsched.core.errors import HetschedError
from hetsched.tail.node_constraints import (
    FILTER_EFFECTS,
    PREFER_NO_SCHEDULE,
    is_cordoned_for,
    matches_expression,
    matches_field,
    matches_node_selector,
    matches_required_affinity,
    tolerates,
    untolerated_taints,
)
from hetsched.tail.node_filter import (
    AFFINITY_REASON,
    UNSCHEDULABLE_REASON,
    filter_nodes,
    unschedulable_message,
)
from hetsched.tail.node_fit import (
    insufficient_resources,
    node_allocatable,
    pod_requests,
    requested_by_node,
)

GI = 2**30


def node(name="n", cpu="2", memory="8Gi", pods="110", labels=None, taints=None, cordoned=False):
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": cordoned},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def container(cpu=None, memory=None, limits=None, restart=None):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    c: dict = {"name": "c", "resources": {"requests": requests, "limits": limits or {}}}
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(containers=(), init=(), overhead=None, node_name=None, phase="Running", **spec):
    body = {"containers": list(containers), "initContainers": list(init), **spec}
    if overhead:
        body["overhead"] = overhead
    if node_name:
        body["nodeName"] = node_name
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": body,
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        (pod([container("500m", "1Gi")]), {"cpu": 0.5, "memory": GI}),
        (pod([container("1.5"), container("2", "512Mi")]), {"cpu": 3.5, "memory": 512 * 2**20}),
        # a limit without a request requests the limit
        (pod([container(limits={"cpu": "2", "memory": "1Gi"})]), {"cpu": 2.0, "memory": GI}),
        # a regular init container runs alone: the max of it and the containers' sum
        (pod([container("1")], init=[container("3")]), {"cpu": 3.0}),
        (pod([container("2")], init=[container("1")]), {"cpu": 2.0}),
        # a sidecar keeps running beside the containers and the later init containers
        (
            pod([container("1")], init=[container("500m", restart="Always"), container("2")]),
            {"cpu": 2.5},
        ),
        (pod([container("1")], overhead={"cpu": "250m"}), {"cpu": 1.25}),
        (pod([container("1e3")]), {"cpu": 1000.0}),
        (pod([container("2k")]), {"cpu": 2000.0}),
    ],
)
def test_pod_requests_follow_kubernetes(the_pod, expected):
    assert pod_requests(the_pod) == pytest.approx(expected)


def test_malformed_quantities_are_errors():
    with pytest.raises(HetschedError):
        pod_requests(pod([container("lots")]))
    with pytest.raises(HetschedError):
        pod_requests(pod([container({"nested": 1})]))
    with pytest.raises(HetschedError):
        node_allocatable(node(cpu="-1"))


def test_bound_running_pods_use_their_node():
    pods = [
        pod([container("1", "1Gi")], node_name="a"),
        pod([container("2")], node_name="a"),
        pod([container("4")], node_name="a", phase="Succeeded"),  # finished: frees its share
        pod([container("8")], node_name="b", phase="Failed"),
        pod([container("8")]),  # pending: uses nothing yet
    ]
    assert requested_by_node(pods) == {"a": {"cpu": 3.0, "memory": GI, "pods": 2.0}}


@pytest.mark.parametrize(
    ("request_", "used", "short"),
    [
        ({"cpu": 1.0}, {}, []),
        ({"cpu": 2.0}, {}, []),  # exactly full fits
        ({"cpu": 2.001}, {}, ["cpu"]),
        ({"cpu": 1.0}, {"cpu": 1.5}, ["cpu"]),
        ({"cpu": 8.0, "memory": 64.0 * GI}, {}, ["cpu", "memory"]),
        ({"cpu": 0.0}, {"pods": 3.0}, ["pods"]),  # the pod slot is always needed
        ({"nvidia.com/gpu": 1.0}, {}, ["nvidia.com/gpu"]),  # a resource the node lacks
    ],
)
def test_fit_against_allocatable_minus_used(request_, used, short):
    allocatable = node_allocatable(node(cpu="2", memory="8Gi", pods="3"))
    assert insufficient_resources(request_, allocatable, used) == short


NO_SCHEDULE = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "yes"}, NO_SCHEDULE, True),
        ({"key": "gpu", "value": "no"}, NO_SCHEDULE, False),
        ({"key": "gpu", "operator": "Exists"}, NO_SCHEDULE, True),
        ({"operator": "Exists"}, NO_SCHEDULE, True),  # empty key + Exists: everything
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, NO_SCHEDULE, False),
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, NO_SCHEDULE, True),
        ({"key": "other", "operator": "Exists"}, NO_SCHEDULE, False),
        ({"key": "gpu", "operator": "Sometimes"}, NO_SCHEDULE, False),
    ],
)
def test_tolerations(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def test_taint_effects_filter_or_prefer():
    taints = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoExecute"},
        {"key": "c", "effect": "PreferNoSchedule"},
    ]
    tainted = node(taints=taints)
    bare = pod()
    assert [t["key"] for t in untolerated_taints(bare, tainted, FILTER_EFFECTS)] == ["a", "b"]
    prefer = frozenset({PREFER_NO_SCHEDULE})
    assert [t["key"] for t in untolerated_taints(bare, tainted, prefer)] == ["c"]
    tolerant = pod(
        tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    )
    assert untolerated_taints(tolerant, tainted, FILTER_EFFECTS) == []


@pytest.mark.parametrize(
    ("cordoned", "tolerations", "expected"),
    [
        (False, [], False),
        (True, [], True),
        (True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], False),
        (True, [{"operator": "Exists", "effect": "NoExecute"}], True),
    ],
)
def test_cordon(cordoned, tolerations, expected):
    assert is_cordoned_for(pod(tolerations=tolerations), node(cordoned=cordoned)) is expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [({}, True), ({"zone": "a"}, True), ({"zone": "b"}, False), ({"zone": "a", "gpu": "1"}, False)],
)
def test_node_selector(selector, expected):
    assert matches_node_selector(pod(nodeSelector=selector), node(labels={"zone": "a"})) is expected


LABELS = {"zone": "a", "cores": "16", "fast": ""}


@pytest.mark.parametrize(
    ("operator", "key", "values", "expected"),
    [
        ("In", "zone", ["a", "b"], True),
        ("In", "zone", ["b"], False),
        ("In", "missing", ["a"], False),
        ("In", "zone", [], False),  # In needs values
        ("NotIn", "zone", ["b"], True),
        ("NotIn", "zone", ["a"], False),
        ("NotIn", "missing", ["a"], True),
        ("Exists", "fast", [], True),
        ("Exists", "missing", [], False),
        ("Exists", "fast", ["x"], False),  # Exists takes no values
        ("DoesNotExist", "missing", [], True),
        ("DoesNotExist", "zone", [], False),
        ("Gt", "cores", ["8"], True),
        ("Gt", "cores", ["16"], False),
        ("Lt", "cores", ["32"], True),
        ("Lt", "cores", ["16"], False),
        ("Gt", "zone", ["1"], False),  # the label is not an integer
        ("Gt", "cores", ["x"], False),
        ("Gt", "cores", ["1", "2"], False),  # exactly one value
        ("Gt", "missing", ["1"], False),
        ("Near", "zone", ["a"], False),
    ],
)
def test_affinity_operators(operator, key, values, expected):
    expression = {"key": key, "operator": operator, "values": values}
    assert matches_expression(expression, LABELS) is expected


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [("In", ["n"], True), ("In", ["m"], False), ("NotIn", ["m"], True), ("In", ["n", "m"], False)],
)
def test_match_fields_on_the_node_name(operator, values, expected):
    expression = {"key": "metadata.name", "operator": operator, "values": values}
    assert matches_field(expression, node("n")) is expected


def affinity(*terms):
    required = {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def expr(key, operator, *values):
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("the_affinity", "expected"),
    [
        (None, True),
        (affinity(expr("zone", "In", "a")), True),
        (affinity(expr("zone", "In", "b")), False),
        (affinity(expr("zone", "In", "b"), expr("cores", "Gt", "8")), True),  # terms are ORed
        (
            affinity(
                {
                    "matchExpressions": [
                        *expr("zone", "In", "a")["matchExpressions"],
                        *expr("cores", "Lt", "8")["matchExpressions"],
                    ]
                }
            ),
            False,
        ),
        (affinity({}), False),  # an empty term matches nothing
        (affinity(), False),
    ],
)
def test_required_affinity(the_affinity, expected):
    the_pod = pod(affinity=the_affinity) if the_affinity else pod()
    assert matches_required_affinity(the_pod, node(labels=LABELS)) is expected


def test_filter_order_reasons_and_message():
    nodes = [
        node("cordoned", cpu="64", memory="256Gi", cordoned=True),
        node("tainted", cpu="64", memory="256Gi", taints=[NO_SCHEDULE]),
        node("elsewhere", cpu="64", memory="256Gi", labels={"zone": "b"}),
        node("small", cpu="2", memory="8Gi", labels={"zone": "a"}),
        node("broken", cpu="many"),
        node("fits", cpu="16", memory="128Gi", labels={"zone": "a"}),
    ]
    big = pod([container("8", "64Gi")], nodeSelector={"zone": "a"})
    feasible, reasons = filter_nodes(big, pod_requests(big), nodes, {"fits": {"cpu": 8.5}})
    assert feasible == []
    assert reasons == Counter(
        {
            UNSCHEDULABLE_REASON: 1,
            "node(s) had untolerated taint {gpu: yes}": 1,
            AFFINITY_REASON: 1,
            "Insufficient cpu": 2,
            "Insufficient memory": 1,
            "node(s) had invalid allocatable resources": 1,
        }
    )
    message = unschedulable_message(len(nodes), reasons)
    assert message.startswith("0/6 nodes are available: ") and "2 Insufficient cpu" in message
    feasible, _ = filter_nodes(big, pod_requests(big), nodes, {})
    assert [f.name for f in feasible] == ["fits"] and feasible[0].free_cpu_fraction == 1.0
