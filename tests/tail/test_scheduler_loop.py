"""The stand-alone scheduler end to end: the official kubernetes client (kubeconfig, token, TLS)
against the fake API server, with the cluster's rules, Events, retries and the watch."""

from __future__ import annotations

import threading
import time

import pytest

from hetsched.core.errors import HetschedError
from hetsched.core.web import ServiceConfig
from hetsched.tail.catalog import default_catalog
from hetsched.tail.fake_apiserver import FakeApiServer
from hetsched.tail.kube_cluster import KubeCluster, load_api_client
from hetsched.tail.models import resolve_model_features
from hetsched.tail.scheduler_loop import SCHEDULER_NAME, LoopSettings, TailScheduler
from hetsched.tail.scoring import P90Scorer, capacity_from_node_object

from .kube_fixtures import make_node, make_pod, self_signed_certificate, write_kubeconfig

TOKEN = "scheduler-token"


class Clock:
    """A monotonic clock the test advances, and the sleeps the loop asked for."""

    def __init__(self) -> None:
        self.now_s = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def cluster(tmp_path, fitted):
    """make(nodes, pods, **settings) -> (fake API server, scheduler, clock); all closed after."""
    servers: list[FakeApiServer] = []

    def make(nodes, pods, tls=False, **settings):
        config = ServiceConfig(token=TOKEN)
        ca = None
        if tls:
            ca, key = self_signed_certificate(tmp_path)
            config = ServiceConfig(token=TOKEN, tls_certfile=ca, tls_keyfile=key)
        api = FakeApiServer(nodes, pods, config)
        servers.append(api)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, TOKEN, ca)
        clock = Clock()
        scheduler = TailScheduler(
            KubeCluster(load_api_client(kubeconfig)),
            P90Scorer(fitted),
            default_catalog(),
            LoopSettings(instance="test", **settings),
            clock=clock,
            sleep=clock.sleep,
        )
        return api, scheduler, clock

    yield make
    for api in servers:
        api.close()


def test_binds_only_our_pending_pods_to_the_fastest_node(cluster, fitted):
    nodes = [make_node("slow", cpu="2", freq_ghz="1.2"), make_node("fast", cpu="8")]
    theirs = make_pod("theirs") | {"spec": make_pod("theirs")["spec"] | {"schedulerName": "x"}}
    bound = make_pod("bound", nodeName="slow")
    api, scheduler, _ = cluster(nodes, [make_pod("ours"), theirs, bound], tls=True)
    decisions = scheduler.schedule_round()
    assert [(d.pod, d.outcome, d.node) for d in decisions] == [("ours", "Scheduled", "fast")]
    p90 = P90Scorer(fitted).predict(
        resolve_model_features("resnet50"), [capacity_from_node_object(n, {}) for n in nodes]
    )
    assert p90["fast"] < p90["slow"]
    assert api.bindings[0]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "fast"}
    assert api.bindings[0]["metadata"]["uid"] == "uid-ours"
    assert api.pods[("default", "theirs")]["spec"].get("nodeName") is None
    (event,) = api.events_for("ours")
    assert event["reason"] == "Scheduled" and event["type"] == "Normal"
    involved = event["involvedObject"]
    assert (involved["kind"], involved["name"], involved["namespace"]) == ("Pod", "ours", "default")
    assert involved["uid"] == "uid-ours"
    assert event["reportingComponent"] == SCHEDULER_NAME == event["source"]["component"]
    assert "Successfully assigned default/ours to fast (predicted P90" in event["message"]
    assert scheduler.schedule_round() == []  # nothing pending any more


def test_big_pods_never_land_on_a_cordoned_tainted_small_node(cluster):
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    nodes = [
        make_node("tiny", cpu="2", memory="8Gi", freq_ghz="3.5", taints=[taint], cordoned=True),
        make_node("tiny-open", cpu="2", memory="8Gi", freq_ghz="3.5"),
        make_node("big", cpu="16", memory="128Gi"),
    ]
    pods = [
        make_pod(f"big-{i}", cpu="8", memory="64Gi", created=f"2025-01-0{i + 1}T00:00:00Z")
        for i in range(3)
    ]
    api, scheduler, _ = cluster(nodes, pods)
    decisions = {d.pod: d for d in scheduler.schedule_round()}
    assert decisions["big-0"].node == decisions["big-1"].node == "big"  # oldest first
    assert decisions["big-2"].outcome == "FailedScheduling"
    assert all(b["target"]["name"] == "big" for b in api.bindings) and len(api.bindings) == 2
    (event,) = api.events_for("big-2")
    assert event["reason"] == "FailedScheduling" and event["type"] == "Warning"
    assert event["message"] == (
        "0/3 nodes are available: 2 Insufficient cpu, 2 Insufficient memory, "
        "1 node(s) were unschedulable."
    )


def test_node_selector_and_required_affinity_are_respected(cluster):
    nodes = [
        make_node("fast", cpu="8", labels={"zone": "a", "cores": "8"}),
        make_node("slow", cpu="1", freq_ghz="1.2", labels={"zone": "b", "cores": "1"}),
    ]
    terms = [{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}]
    by_name = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["slow"]}]}]
    required = "requiredDuringSchedulingIgnoredDuringExecution"

    def affinity(node_terms):
        return {"nodeAffinity": {required: {"nodeSelectorTerms": node_terms}}}

    pods = [
        make_pod("free", cpu="100m"),
        make_pod("selector", cpu="100m", nodeSelector={"zone": "b"}),
        make_pod("affinity", cpu="100m", affinity=affinity(terms)),
        make_pod("field", cpu="100m", affinity=affinity(by_name)),
        make_pod("nowhere", cpu="100m", nodeSelector={"zone": "c"}),
    ]
    api, scheduler, _ = cluster(nodes, pods)
    placed = {d.pod: d.node for d in scheduler.schedule_round()}
    assert placed == {
        "free": "fast",
        "selector": "slow",
        "affinity": "slow",
        "field": "slow",
        "nowhere": None,
    }
    assert (
        "2 node(s) didn't match Pod's node affinity/selector"
        in (api.events_for("nowhere")[0]["message"])
    )


def test_a_conflict_and_a_server_error_are_retried_with_seeded_backoff(cluster):
    def run(seed):
        api, scheduler, clock = cluster([make_node("n")], [make_pod("p")], seed=seed)
        api.binding_faults.extend([409, 500])
        (decision,) = scheduler.schedule_round()
        return api, decision, clock.sleeps

    api, decision, sleeps = run(seed=7)
    assert (decision.outcome, decision.node, decision.attempts) == ("Scheduled", "n", 3)
    assert api.binding_calls == 3 and len(api.bindings) == 1
    assert 0.05 <= sleeps[0] <= 0.1 and 0.1 <= sleeps[1] <= 0.2  # equal jitter of 0.1 s, 0.2 s
    assert run(seed=7)[2] == sleeps and run(seed=8)[2] != sleeps


def test_a_pod_bound_by_someone_else_is_left_alone(cluster):
    api, scheduler, _ = cluster([make_node("n")], [make_pod("p")])
    stale = api.list_pods([])[0][0]
    api.pods[("default", "p")]["spec"]["nodeName"] = "other"  # another scheduler was faster
    decision = scheduler.schedule_pod(stale, scheduler.cluster.list_nodes(), {})
    assert (decision.outcome, decision.message) == ("BoundElsewhere", "already bound to other")
    assert api.events == [] and api.bindings == []


def test_binding_gives_up_after_its_attempts_and_retries_the_pod_later(cluster):
    api, scheduler, clock = cluster([make_node("n")], [make_pod("p")], bind_attempts=2)
    api.binding_faults.extend([503, 503])
    (decision,) = scheduler.schedule_round()
    assert decision.outcome == "FailedScheduling" and decision.attempts == 2
    assert "failed after 2 attempts: 503" in api.events_for("p")[0]["message"]
    clock.now_s += 120.0  # past the pod's retry backoff
    (decision,) = scheduler.schedule_round()
    assert decision.outcome == "Scheduled"


def test_a_pod_that_fits_nowhere_backs_off_then_goes_when_room_appears(cluster):
    api, scheduler, clock = cluster([make_node("small", cpu="2")], [make_pod("p", cpu="4")])
    assert scheduler.schedule_round()[0].outcome == "FailedScheduling"
    failures, due_s = scheduler.retry_due[("default", "p")]
    assert failures == 1 and clock.now_s + 0.5 <= due_s <= clock.now_s + 1.0
    with api.lock:
        api.nodes.append(make_node("roomy", cpu="8"))
    assert scheduler.schedule_round() == []  # still backing off
    clock.now_s = due_s
    (decision,) = scheduler.schedule_round()
    assert (decision.outcome, decision.node) == ("Scheduled", "roomy")
    assert [e["reason"] for e in api.events_for("p")] == ["FailedScheduling", "Scheduled"]
    assert scheduler.retry_due == {}


def test_an_unknown_model_falls_back_to_the_least_requested_node(cluster):
    nodes = [make_node("a", cpu="4"), make_node("b", cpu="4")]
    busy = make_pod("busy", cpu="3", nodeName="a") | {"status": {"phase": "Running"}}
    _, scheduler, _ = cluster(nodes, [busy, make_pod("p", model="http://evil/x.pt")])
    (decision,) = scheduler.schedule_round()
    assert decision.node == "b" and "no P90 prediction" in decision.message


def test_queue_order_is_priority_then_age(cluster):
    pods = [
        make_pod("old", cpu="3", created="2025-01-01T00:00:00Z"),
        make_pod("young-urgent", cpu="3", created="2025-01-02T00:00:00Z", priority=1000),
    ]
    _, scheduler, _ = cluster([make_node("n", cpu="4")], pods)
    decisions = scheduler.schedule_round()
    assert [(d.pod, d.outcome) for d in decisions] == [
        ("young-urgent", "Scheduled"),
        ("old", "FailedScheduling"),
    ]


def test_the_watch_wakes_the_loop_for_a_new_pod(cluster):
    api, scheduler, _ = cluster([make_node("n")], [], poll_interval_s=20.0)
    scheduler.sleep = time.sleep
    decisions = []
    started_s = time.monotonic()
    thread = threading.Thread(target=lambda: decisions.extend(scheduler.run(rounds=2)))
    thread.start()
    time.sleep(0.5)
    api.add_pod(make_pod("late"))
    thread.join(timeout=15)
    assert [(d.pod, d.node) for d in decisions] == [("late", "n")]
    assert time.monotonic() - started_s < 10


def test_client_configuration_errors_are_one_line(tmp_path, cluster):
    api, _, _ = cluster([make_node("n")], [])
    wrong = write_kubeconfig(tmp_path / "wrong", api.url, "not-the-token")
    with pytest.raises(HetschedError, match="listing nodes and pods failed: 401"):
        TailScheduler(KubeCluster(load_api_client(wrong)), None, default_catalog()).schedule_round()
    with pytest.raises(HetschedError, match="not found"):
        load_api_client(tmp_path / "missing")
    (tmp_path / "broken").write_text("clusters: [")
    with pytest.raises(HetschedError, match="cannot configure"):
        load_api_client(tmp_path / "broken")
    with pytest.raises(HetschedError, match="in-cluster"):
        load_api_client(in_cluster=True)
    closed = write_kubeconfig(tmp_path / "closed", "http://127.0.0.1:9", TOKEN)
    scheduler = TailScheduler(KubeCluster(load_api_client(closed), timeout_s=2), None, None)
    with pytest.raises(HetschedError, match="did not answer"):
        scheduler.schedule_round()
