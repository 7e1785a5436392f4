"""The stand-alone scheduler loop against the fake API server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from hetsched.tail.kube import SCHEDULER_NAME, FakeApiServer, schedule_pending
from hetsched.tail.models import resolve_model_features
from hetsched.tail.scoring import P90Scorer, capacity_from_node_object

FIXTURES = Path(__file__).parent / "fixtures"


def _pod(name: str, scheduler: str) -> dict:
    pod = json.loads((FIXTURES / "extender_args_nodes.json").read_text())["Pod"]
    pod["metadata"]["name"] = name
    pod["spec"]["schedulerName"] = scheduler
    return pod


def test_binds_only_our_pending_pods_to_the_fastest_node(fitted):
    nodes = json.loads((FIXTURES / "extender_args_nodes.json").read_text())["Nodes"]["items"]
    pods = [
        _pod("ours-a", SCHEDULER_NAME),
        _pod("ours-b", SCHEDULER_NAME),
        _pod("theirs", "default-scheduler"),
    ]
    pods[1]["spec"]["nodeName"] = "node2"  # already bound: must be left alone
    api = FakeApiServer(nodes, pods)
    try:
        bound = schedule_pending(api.url, P90Scorer(fitted))
        assert [pod for pod, _ in bound] == ["ours-a"]
        scorer = P90Scorer(fitted)
        p90 = scorer.predict(
            resolve_model_features("resnet50"), [capacity_from_node_object(n, {}) for n in nodes]
        )
        assert p90[bound[0][1]] == min(p90.values()) < p90["node1"]
        assert api.bindings[0]["kind"] == "Binding"
        assert api.bindings[0]["target"] == {
            "apiVersion": "v1",
            "kind": "Node",
            "name": bound[0][1],
        }
        assert api.pods[("default", "ours-a")]["spec"]["nodeName"] == bound[0][1]
        assert api.pods[("default", "theirs")]["spec"].get("nodeName") is None
        assert schedule_pending(api.url, P90Scorer(fitted)) == []  # nothing pending any more
        conflict = httpx.post(
            f"{api.url}/api/v1/namespaces/default/pods/ours-a/binding", json=api.bindings[0]
        )
        assert conflict.status_code == 409
    finally:
        api.close()
