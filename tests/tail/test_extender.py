"""Extender JSON round trips over HTTP with fixtures in the upstream ExtenderArgs shape."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import pytest

from hetsched.tail.extender import NEUTRAL_SCORE, handle_prioritize, serve_in_thread
from hetsched.tail.scoring import P90Scorer, scores_from_p90

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str):
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture
def extender(fitted):
    server = serve_in_thread(P90Scorer(fitted))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_scores_from_p90_map_lower_latency_higher():
    scores = scores_from_p90({"a": 0.01, "b": 0.02, "c": 0.03})
    assert scores == {"a": 10, "b": 5, "c": 0}
    assert scores_from_p90({"a": 0.1, "b": 0.1}) == {"a": 10, "b": 10}


@pytest.mark.parametrize("fixture", ["extender_args_nodes.json", "extender_args_names.json"])
def test_prioritize_round_trip(extender, fixture):
    reply = httpx.post(f"{extender}/prioritize", json=load(fixture))
    assert reply.status_code == 200
    body = reply.json()
    shape = load("host_priority_list_shape.json")[0]
    assert [set(h) for h in body] == [set(shape)] * 4
    assert [h["Host"] for h in body] == ["node1", "node2", "node3", "node4"]
    scores = {h["Host"]: h["Score"] for h in body}
    assert all(0 <= s <= 10 for s in scores.values())
    if fixture == "extender_args_nodes.json":  # node objects carry cpu: more cores → faster
        assert scores["node1"] < scores["node4"] == 10


def test_one_connection_serves_many_calls(extender):
    """kube-scheduler keeps its connection open: every call must be answered on it."""
    args = load("extender_args_nodes.json")
    with httpx.Client() as client:
        replies = [client.post(f"{extender}/prioritize", json=args) for _ in range(3)]
        bad = client.post(f"{extender}/prioritize", content=b"{not json")
        after = client.post(f"{extender}/prioritize", json=args)
    assert [r.http_version for r in replies] == ["HTTP/1.1"] * 3
    assert all(r.headers.get("connection", "").lower() != "close" for r in replies)
    assert bad.status_code == 400 and after.status_code == 200
    assert after.json() == replies[0].json()


def test_filter_round_trip_keeps_or_fails_by_slo(extender):
    args = load("extender_args_nodes.json")
    body = httpx.post(f"{extender}/filter", json=args).json()
    assert set(body) == set(load("extender_filter_result_shape.json"))
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == [
        "node1",
        "node2",
        "node3",
        "node4",
    ]
    assert body["FailedNodes"] == {} and body["Error"] == ""
    strict = copy.deepcopy(args)
    strict["Pod"]["metadata"]["annotations"]["hetsched.io/p90-slo-ms"] = "0.001"
    body = httpx.post(f"{extender}/filter", json=strict).json()
    assert body["Nodes"]["items"] == [] and set(body["FailedNodes"]) == {
        "node1",
        "node2",
        "node3",
        "node4",
    }
    assert "SLO" in body["FailedNodes"]["node1"]
    names = httpx.post(f"{extender}/filter", json=load("extender_args_names.json")).json()
    assert names["NodeNames"] == ["node1", "node2", "node3", "node4"] and names["Nodes"] is None


def test_malformed_requests_get_400(extender):
    assert httpx.post(f"{extender}/prioritize", content=b"{not json").status_code == 400
    reply = httpx.post(f"{extender}/filter", json={"Nodes": None})
    assert reply.status_code == 400 and "Pod" in reply.json()["Error"]
    assert httpx.post(f"{extender}/nope", json={}).status_code == 404


def test_failing_model_gives_neutral_scores(fitted):
    args = load("extender_args_names.json")
    args["Pod"]["metadata"]["annotations"]["hetsched.io/model"] = "no-such-model"
    result = handle_prioritize(P90Scorer(fitted), args)
    assert {h["Score"] for h in result} == {NEUTRAL_SCORE}
