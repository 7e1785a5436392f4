"""The extender over HTTP with upstream ExtenderArgs fixtures: semantics, scaling, node cache."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import httpx
import numpy as np
import pytest

from hetsched.core.web import ServiceConfig
from hetsched.core.web_server import ServiceServer
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import Extender, scheduler_config
from hetsched.tail.extender_app import create_extender_app, parse_args_json
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.quantities import parse_cpu_cores, parse_memory_bytes
from hetsched.tail.scoring import NEUTRAL_SCORE, P90Scorer, scores_from_p90
from hetsched.tail.telemetry import NodeTelemetry

FIXTURES = Path(__file__).parent / "fixtures"
NAMES = ["node1", "node2", "node3", "node4"]


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class CpuBoundRegressor:
    """P90 = 10 ms per GFLOP per effective core: simple enough to compute SLO cases by hand."""

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
        return np.array([r["flops"] / 1e9 * 0.01 / max(r["cpu_eff"], 1e-3) for r in rows])


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def start(extender: Extender) -> tuple[ServiceServer, str]:
    config = ServiceConfig()
    server = ServiceServer(create_extender_app(extender, config), config)
    return server, server.start()


@pytest.fixture
def served(fitted):
    server, url = start(Extender(P90Scorer(fitted), default_catalog()))
    yield url
    server.stop()


def test_scores_have_a_dead_band_and_no_min_max_stretch():
    assert scores_from_p90({"a": 0.0100, "b": 0.0102}) == {"a": 10, "b": 10}  # 0.2 ms: no pref.
    # log1p(ms): 2.40, 3.04, 3.71 → 3.2 and 6.6 bands of 0.2 above the best
    assert scores_from_p90({"a": 0.01, "b": 0.02, "c": 0.04}) == {"a": 10, "b": 7, "c": 4}
    assert scores_from_p90({"a": 0.01, "b": 10.0}) == {"a": 10, "b": 0}
    assert scores_from_p90({"a": 0.01, "b": 0.02}, error_band=1.0) == {"a": 10, "b": 10}
    assert scores_from_p90({"a": float("nan"), "b": 0.02}) == {"a": 0, "b": 10}
    assert scores_from_p90({"a": float("inf")}) == {"a": NEUTRAL_SCORE}
    rng = np.random.default_rng(0)
    for _ in range(200):  # monotone: a higher predicted P90 never scores higher
        p90 = dict(enumerate(rng.lognormal(-3, 1, 6).tolist()))
        scores = scores_from_p90(p90)
        ranked = sorted(p90, key=p90.__getitem__)
        assert [scores[n] for n in ranked] == sorted(scores.values(), reverse=True)


@pytest.mark.parametrize(
    ("quantity", "cores"),
    [("500m", 0.5), ("1.5", 1.5), ("2", 2.0), ("1e3", 1000.0), ("2k", 2000.0), (4, 4.0)],
)
def test_cpu_quantities_parse_as_kubernetes_does(quantity, cores):
    assert parse_cpu_cores(quantity) == cores


def test_memory_and_bad_quantities():
    assert parse_memory_bytes("64Gi") == 64 * 2**30 and parse_memory_bytes("1e3") == 1000
    assert parse_memory_bytes("512M") == 512 * 10**6
    for bad in ["", "abc", "1.5.2", "-1", "0", "1e999", True, "9" * 100]:
        with pytest.raises(Exception, match=r"quantit|positive"):
            parse_cpu_cores(bad)


@pytest.mark.parametrize("fixture", ["extender_args_nodes.json", "extender_args_names.json"])
def test_prioritize_round_trip(served, fixture):
    reply = httpx.post(f"{served}/prioritize", json=load(fixture))
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert [set(h) for h in body] == [set(load("host_priority_list_shape.json")[0])] * 4
    assert [h["Host"] for h in body] == NAMES
    scores = [h["Score"] for h in body]
    if fixture == "extender_args_nodes.json":  # 4, 8, "12000m", 16 cores: more is faster
        assert scores == sorted(scores) and scores[-1] == 10 and scores[0] < 10
    else:  # bare names and no telemetry: nothing to predict from
        assert scores == [NEUTRAL_SCORE] * 4


def test_a_half_core_node_is_half_a_core():
    extender = Extender(P90Scorer(CpuBoundRegressor()), default_catalog())
    args = load("extender_args_nodes.json")
    args["Nodes"]["items"][0]["status"]["allocatable"]["cpu"] = "500m"
    args["Nodes"]["items"][1]["status"]["allocatable"]["cpu"] = "1"
    args["Nodes"]["items"] = args["Nodes"]["items"][:2]
    scores, _ = extender.prioritize(parse_args_json(json.dumps(args).encode()))
    # resnet50: 81.9 ms per core → 163.8 vs 81.9 ms; log1p gap 0.69: three 0.2 bands
    assert [s["Score"] for s in scores] == [7, 10]


def telemetry_for(nodes: dict[str, tuple[float, float]], clock: Clock) -> NodeTelemetry:
    telemetry = NodeTelemetry(ttl_s=30.0, clock=clock)
    telemetry.update(NodeCapacity(n, c, 2.3, u, u) for n, (c, u) in nodes.items())
    return telemetry


def test_node_cache_mode_ranks_as_full_node_objects():
    """nodeCacheCapable: true sends names only; the telemetry cache stands in for the objects."""
    clock = Clock()
    loads = {"node1": (4, 0.0), "node2": (8, 0.9), "node3": (12, 0.5), "node4": (16, 0.25)}
    extender = Extender(
        P90Scorer(CpuBoundRegressor()), default_catalog(), telemetry_for(loads, clock)
    )
    by_objects, _ = extender.prioritize(
        parse_args_json(json.dumps(load("extender_args_nodes.json")).encode())
    )
    by_names, _ = extender.prioritize(
        parse_args_json(json.dumps(load("extender_args_names.json")).encode())
    )
    assert by_names == by_objects
    assert [h["Score"] for h in by_names] != [NEUTRAL_SCORE] * 4
    # Live load, not allocatable: node2 (8 cores, 90 % busy) ranks below node1 (4 idle).
    scores = {h["Host"]: h["Score"] for h in by_names}
    assert scores["node2"] < scores["node1"] < scores["node4"]


def test_stale_readings_are_scored_neutrally():
    clock = Clock()
    telemetry = telemetry_for({"node1": (4, 0.0), "node2": (16, 0.0)}, clock)
    extender = Extender(P90Scorer(CpuBoundRegressor()), default_catalog(), telemetry)
    args = parse_args_json(json.dumps(load("extender_args_names.json")).encode())
    clock.now_s += 20
    telemetry.update([NodeCapacity("node2", 16, 2.3, 0.0, 0.0)])  # node2 fresh, node1 ages
    clock.now_s += 15  # node1's reading is now 35 s old: past the 30 s TTL
    scores, outcome = extender.prioritize(args)
    assert [s["Score"] for s in scores] == [NEUTRAL_SCORE, 10, NEUTRAL_SCORE, NEUTRAL_SCORE]
    assert outcome.neutral_nodes == {"stale": 1, "unknown_node": 2}


def test_filter_splits_resolvable_from_unresolvable_failures():
    """resnet50 needs 81.9 ms on one effective core. SLO 50 ms: node1 (4 cores, 75 % busy: 1
    effective) fails now but would pass idle (20 ms); node2 (1 core) can never pass."""
    clock = Clock()
    loads = {"node1": (4, 0.75), "node2": (1, 0.0), "node3": (16, 0.0)}
    extender = Extender(
        P90Scorer(CpuBoundRegressor()), default_catalog(), telemetry_for(loads, clock)
    )
    config = ServiceConfig()
    server = ServiceServer(create_extender_app(extender, config), config)
    url = server.start()
    try:
        args = load("extender_args_nodes.json")
        args["Pod"]["metadata"]["annotations"]["hetsched.io/p90-slo-ms"] = "50"
        body = httpx.post(f"{url}/filter", json=args).json()
        assert set(body) == set(load("extender_filter_result_shape.json"))
        assert (
            set(body["FailedNodes"]) == {"node1"} and "under load" in body["FailedNodes"]["node1"]
        )
        assert set(body["FailedAndUnresolvableNodes"]) == {"node2"}
        assert "even idle" in body["FailedAndUnresolvableNodes"]["node2"]
        # Kept nodes come back exactly as sent (later plugins read their objects).
        assert body["Nodes"]["items"] == [args["Nodes"]["items"][i] for i in (2, 3)]
        assert body["NodeNames"] is None and body["Error"] == ""
        names = load("extender_args_names.json")
        names["Pod"] = args["Pod"]
        by_name = httpx.post(f"{url}/filter", json=names).json()
        assert by_name["NodeNames"] == ["node3", "node4"] and by_name["Nodes"] is None
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ({"hetsched.io/model": "no-such-model"}, "unknown"),
        ({"hetsched.io/model": "Not A Key!"}, "invalid"),
        ({}, "missing"),
        ({"hetsched.io/model": "resnet50", "hetsched.io/p90-slo-ms": "fast"}, "bad_slo"),
        ({"hetsched.io/model": "resnet50", "hetsched.io/p90-slo-ms": "-5"}, "bad_slo"),
    ],
)
def test_fail_open_keeps_every_node_and_counts_why(served, annotations, reason):
    args = load("extender_args_nodes.json")
    args["Pod"]["metadata"]["annotations"] = {"hetsched.io/p90-slo-ms": "0.001", **annotations}
    kept = httpx.post(f"{served}/filter", json=args).json()
    assert len(kept["Nodes"]["items"]) == 4 and kept["FailedNodes"] == {} and kept["Error"] == ""
    if reason != "bad_slo":
        scores = httpx.post(f"{served}/prioritize", json=args).json()
        assert {h["Score"] for h in scores} == {NEUTRAL_SCORE}
    metrics = httpx.get(f"{served}/metrics").text
    assert f'hetsched_extender_model_fallbacks_total{{reason="{reason}"}}' in metrics


def test_a_failing_regressor_gives_neutral_scores():
    class Failing:
        def predict_p90_s(self, rows):
            raise RuntimeError("broken model file")

    server, url = start(Extender(P90Scorer(Failing()), default_catalog()))  # starts regardless
    try:
        scores = httpx.post(f"{url}/prioritize", json=load("extender_args_nodes.json")).json()
        assert {h["Score"] for h in scores} == {NEUTRAL_SCORE}
        assert 'reason="prediction_failed"' in httpx.get(f"{url}/metrics").text
    finally:
        server.stop()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[1, 2",
        b'{"Pod": NaN}',
        b"null",
        b'{"Pod": {}}',
        b'{"Pod": {}, "NodeNames": ["\xff\xfe"]}',
        b'{"Pod": {}, "NodeNames": [3]}',
        b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}',
        b'{"Pod": {}, "Nodes": {"items": ["node-1"]}}',
        b'{"Pod": {}, "Nodes": {"items": [{"metadata": "node-1"}]}}',
        b'{"Pod": {"metadata": {"annotations": {"hetsched.io/model": 5}}}, "NodeNames": []}',
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_bad_bodies_get_400_with_a_reason(served, body, verb):
    reply = httpx.post(f"{served}/{verb}", content=body)
    assert reply.status_code == 400
    assert reply.json()["reason"] == "bad_request"
    assert reply.json()["error"].startswith("malformed extender request")


def test_one_connection_serves_many_calls(served):
    """kube-scheduler keeps its connection open: every call, bad ones too, is answered on it."""
    args = load("extender_args_nodes.json")
    with httpx.Client() as client:
        replies = [client.post(f"{served}/prioritize", json=args) for _ in range(3)]
        bad = client.post(f"{served}/prioritize", content=b"{not json")
        after = client.post(f"{served}/prioritize", json=args)
    assert all(r.headers.get("connection", "").lower() != "close" for r in replies)
    assert bad.status_code == 400 and after.status_code == 200
    assert after.json() == replies[0].json()


def test_names_with_escapes_round_trip(served):
    args = load("extender_args_nodes.json")
    for i, node in enumerate(args["Nodes"]["items"]):
        node["metadata"]["name"] = f'nœud-{i} "\\" \u2603'
    reply = httpx.post(f"{served}/prioritize", content=json.dumps(args).encode())
    assert [h["Host"] for h in reply.json()] == [
        n["metadata"]["name"] for n in args["Nodes"]["items"]
    ]


def test_bad_content_length_and_unknown_paths(served):
    port = int(served.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")
    reply = httpx.post(f"{served}/nope", json={})
    assert reply.status_code == 404 and reply.json()["reason"] == "not_found"
    assert httpx.get(f"{served}/readyz").json() == {"status": "ready"}


def test_scheduler_config_snippet():
    text = scheduler_config("https://ext.kube-system:8888", node_cache_capable=True)
    for line in [
        'urlPrefix: "https://ext.kube-system:8888"',
        "filterVerb: filter",
        "prioritizeVerb: prioritize",
        "nodeCacheCapable: true",
        "enableHTTPS: true",
        "ignorable: true",
    ]:
        assert line in text


def test_predict_asks_once_per_distinct_node_shape():
    calls: list[list[dict]] = []

    class Counting:
        def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
            calls.append(rows)
            return np.array([1.0 / r["cpu_eff"] for r in rows])

    model = ModelFeatures("m", 10**9, 10.0, 0, 0, 0, 0)
    nodes = [NodeCapacity(f"n{i}", 1 + i % 2, 2.3, 0.0, 0.0) for i in range(6)]
    p90 = P90Scorer(Counting()).predict(model, nodes)
    assert len(calls) == 1 and [r["cpu_eff"] for r in calls[0]] == [1.0, 2.0]
    assert p90 == {f"n{i}": [1.0, 0.5][i % 2] for i in range(6)}


def test_filter_without_slo_keeps_all(served):
    args = copy.deepcopy(load("extender_args_nodes.json"))
    del args["Pod"]["metadata"]["annotations"]["hetsched.io/p90-slo-ms"]
    body = httpx.post(f"{served}/filter", json=args).json()
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == NAMES


def test_nodes_within_one_percent_share_a_prediction():
    calls: list[list[dict]] = []

    class Counting:
        def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
            calls.append(rows)
            return np.array([1.0 / r["cpu_eff"] for r in rows])

    model = ModelFeatures("m", 10**9, 10.0, 0, 0, 0, 0)
    cpu, freq = np.array([4.0, 4.004, 4.1, 8.0, 4.0]), np.full(5, 2.3)
    shared = P90Scorer(Counting(), share_within=0.01).predict_array(model, cpu, freq)
    assert [r["cpu_eff"] for r in calls[0]] == [4.0, 4.1, 8.0]  # first node of each group
    assert shared.tolist() == [0.25, 0.25, 1 / 4.1, 0.125, 0.25]
    exact = P90Scorer(Counting()).predict_array(model, cpu, freq)
    assert len(calls[1]) == 4 and exact[1] == 1 / 4.004
