"""Extender JSON round trips over HTTP with fixtures in the upstream ExtenderArgs shape."""

from __future__ import annotations

import copy
import gc
import json
import socket
from pathlib import Path

import httpx
import numpy as np
import pytest

from hetsched.tail.extender import NEUTRAL_SCORE, handle_prioritize, serve_in_thread, warm_up
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.scoring import P90Scorer, scores_from_p90
from hetsched.tail.zoo import MODELS

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


def test_replies_are_the_json_the_stdlib_would_send(extender, fitted):
    """orjson encodes compactly; what matters is that the reply parses to the stdlib's payload,
    node names with escapes and non-ASCII characters included."""
    args = load("extender_args_nodes.json")
    for i, node in enumerate(args["Nodes"]["items"]):
        node["metadata"]["name"] = f'nœud-{i} "\\" \u2603'
    reply = httpx.post(f"{extender}/prioritize", content=json.dumps(args).encode())
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    expected = handle_prioritize(P90Scorer(fitted), args)
    assert json.loads(reply.content) == json.loads(json.dumps(expected))
    assert [h["Host"] for h in reply.json()] == [
        n["metadata"]["name"] for n in args["Nodes"]["items"]
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[1, 2",
        b'{"Pod": NaN}',
        b'{"Pod": {}, "NodeNames": ["\xff\xfe"]}',
        b'{"Pod": {}, "NodeNames": [3]}',
        b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}',
        b'{"Pod": {}, "Nodes": {"items": ["node-1"]}}',
        b'{"Pod": {}, "Nodes": {"items": [{"metadata": "node-1"}]}}',
    ],
)
def test_bad_bodies_get_400_with_a_message(extender, body):
    reply = httpx.post(f"{extender}/prioritize", content=body)
    assert reply.status_code == 400
    assert reply.json()["Error"].startswith("malformed extender request")


def test_bad_content_length_gets_400_on_a_kept_connection(extender):
    port = int(extender.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")


class CountingRegressor:
    """Predicts P90 = 1 / cpu_eff and records the rows it was asked for."""

    def __init__(self) -> None:
        self.calls: list[list[dict]] = []

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
        self.calls.append(rows)
        return np.array([1.0 / r["cpu_eff"] for r in rows], dtype=np.float32)


def test_predict_asks_once_per_distinct_node_shape():
    regressor = CountingRegressor()
    model = ModelFeatures("m", 10**9, 10.0, 0, 0, 0, 0)
    nodes = [NodeCapacity(f"n{i}", 1 + i % 2, 2.3, 0.0, 0.0) for i in range(6)]
    p90 = P90Scorer(regressor).predict(model, nodes)
    assert len(regressor.calls) == 1 and [r["cpu_eff"] for r in regressor.calls[0]] == [1.0, 2.0]
    assert regressor.calls[0][0] == {
        "size_mb": 10.0,
        "flops": 10**9,
        "cpu_eff": 1.0,
        "freq_eff_ghz": 2.3,
    }
    assert p90 == {f"n{i}": [1.0, 0.5][i % 2] for i in range(6)}
    assert all(type(p) is float for p in p90.values())


def test_warm_up_scores_the_zoo_and_freezes_the_heap(fitted):
    warm_up(P90Scorer(fitted))
    assert gc.get_freeze_count() > 0
    for ref in MODELS.names():
        args = load("extender_args_nodes.json")
        args["Pod"]["metadata"]["annotations"]["hetsched.io/model"] = ref
        assert {h["Score"] for h in handle_prioritize(P90Scorer(fitted), args)} != {NEUTRAL_SCORE}


def test_warm_up_survives_a_failing_regressor():
    """The server must still start (and answer neutral scores) when the model cannot predict."""

    class Failing:
        def predict_p90_s(self, rows):
            raise RuntimeError("broken model file")

    warm_up(P90Scorer(Failing()))
