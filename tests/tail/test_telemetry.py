"""Node telemetry from a fake Prometheus HTTP endpoint: keyed by node name, refreshed in the
background, stale past its TTL, and scored neutrally when stale or when Prometheus is down."""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi import Request

from hetsched.core.errors import ConfigError, DataError, HetschedError
from hetsched.core.web import ServiceConfig, create_service_app
from hetsched.core.web_server import ServiceServer
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import Extender
from hetsched.tail.extender_app import create_extender_app
from hetsched.tail.scoring import NEUTRAL_SCORE, P90Scorer
from hetsched.tail.telemetry import (
    NodeTelemetry,
    PrometheusNodeSource,
    TelemetryRefresher,
    parse_instance_nodes,
)
from tests.tail.test_extender import CpuBoundRegressor, load


class FakePrometheus:
    """Answers /api/v1/query for the idle-rate and frequency queries from in-memory series."""

    def __init__(self) -> None:
        self.idle: list[dict] = []
        self.freq: list[dict] = []
        self.other: dict[str, list[dict]] = {}  # contention queries by their metric name
        self.down = False
        self.queries: list[str] = []
        config = ServiceConfig()
        app = create_service_app("fake prometheus", config, metrics_prefix="fake")

        @app.get("/api/v1/query")
        async def query(request: Request) -> dict:
            expr = request.query_params["query"]
            self.queries.append(expr)
            if self.down:
                return {"status": "error", "error": "storage unavailable"}
            if "node_cpu_seconds_total" in expr:
                series = self.idle
            elif "node_cpu_frequency" in expr:
                series = self.freq
            else:
                series = next((v for k, v in self.other.items() if k in expr), [])
            return {"status": "success", "data": {"resultType": "vector", "result": series}}

        self.server = ServiceServer(app, config)
        self.url = self.server.start()

    def set_node(self, labels: dict[str, str], idle_per_cpu: list[float], hz: float) -> None:
        for cpu, idle in enumerate(idle_per_cpu):
            metric = {**labels, "cpu": str(cpu), "mode": "idle"}
            self.idle.append({"metric": metric, "value": [time.time(), str(idle)]})
            self.freq.append({"metric": {**labels, "cpu": str(cpu)}, "value": [0, str(hz)]})


@pytest.fixture
def prometheus():
    fake = FakePrometheus()
    yield fake
    fake.server.stop()


def test_series_are_keyed_by_node_label_or_instance_mapping(prometheus):
    prometheus.set_node({"node": "node1", "instance": "10.0.0.1:9100"}, [0.5, 0.5], 2.3e9)
    prometheus.set_node({"instance": "10.0.0.2:9100"}, [1.0] * 4, 3.0e9)
    prometheus.set_node({"instance": "10.0.0.9:9100"}, [1.0], 2.0e9)  # maps to no node
    source = PrometheusNodeSource(
        prometheus.url, instance_nodes=parse_instance_nodes(["10.0.0.2:9100=node2"])
    )
    with httpx.Client() as client:
        capacities, skipped = source.fetch(client)
    by_name = {c.name: c for c in capacities}
    assert sorted(by_name) == ["node1", "node2"] and skipped == 2  # idle + freq of 10.0.0.9
    assert by_name["node1"].cores == 2 and by_name["node1"].u_cores == pytest.approx(0.5)
    assert by_name["node2"].cores == 4 and by_name["node2"].freq_ghz == pytest.approx(3.0)
    assert 'rate(node_cpu_seconds_total{mode="idle"}[30s])' in prometheus.queries


def test_contention_comes_from_load1_or_procs_running_and_psi_when_exported(prometheus):
    for name in ("busy", "queued", "bare", "hostile"):
        prometheus.set_node({"node": name}, [0.0, 0.0], 2.3e9)  # 100 % busy, 2 cores each
    value = lambda node, v: {"metric": {"node": node}, "value": [0, v]}  # noqa: E731
    prometheus.other = {
        "node_load1": [value("busy", "2.0"), value("hostile", "NaN")],
        "node_procs_running": [value("queued", "40"), value("hostile", "-3"), {"bad": 1}],
        "node_pressure_cpu_waiting_seconds_total": [value("busy", "0.25"), value("x", "oops")],
    }
    with httpx.Client() as client:
        capacities, _ = PrometheusNodeSource(prometheus.url).fetch(client)
    by_name = {c.name: c for c in capacities}
    assert all(c.u_cores == 1.0 for c in capacities)  # utilisation cannot tell them apart
    assert (by_name["busy"].runq_per_core, by_name["busy"].cpu_pressure) == (1.0, 0.25)
    assert (by_name["queued"].runq_per_core, by_name["queued"].cpu_pressure) == (20.0, None)
    assert by_name["bare"].runq_per_core is None and by_name["hostile"].runq_per_core is None
    assert "rate(node_pressure_cpu_waiting_seconds_total[30s])" in prometheus.queries


def test_a_node_without_frequency_series_gets_the_default_clock(prometheus):
    prometheus.set_node({"node": "vm"}, [1.0], 2.0e9)
    prometheus.freq.clear()
    with httpx.Client() as client:
        (capacity,), _ = PrometheusNodeSource(prometheus.url).fetch(client)
    assert capacity.freq_ghz == pytest.approx(2.3)


def test_refresh_failures_keep_old_readings_which_then_go_stale(prometheus):
    prometheus.set_node({"node": "node1"}, [1.0], 2.3e9)
    now = {"s": 0.0}
    telemetry = NodeTelemetry(ttl_s=10.0, clock=lambda: now["s"])
    failures: list[Exception] = []
    refresher = TelemetryRefresher(
        PrometheusNodeSource(prometheus.url), telemetry, 5.0, on_failure=failures.append
    )
    try:
        assert refresher.refresh_once() and len(telemetry) == 1
        prometheus.down = True
        now["s"] = 8.0
        assert not refresher.refresh_once() and "storage unavailable" in str(failures[0])
        assert telemetry.view().lookup("node1")[1] is False  # 8 s old: still fresh
        now["s"] = 11.0
        capacity, stale = telemetry.view().lookup("node1")
        assert capacity is not None and stale is True
        assert telemetry.view().lookup("never-seen") == (None, False)
    finally:
        refresher.stop()


def test_unreachable_prometheus_is_a_data_error():
    with httpx.Client() as client, pytest.raises(DataError, match="Prometheus at"):
        PrometheusNodeSource("http://127.0.0.1:9", timeout_s=0.5).fetch(client)
    with pytest.raises(HetschedError, match="INSTANCE=NODE"):
        parse_instance_nodes(["nope"])
    with pytest.raises(HetschedError, match="TTL"):
        NodeTelemetry(ttl_s=0)


def test_extender_refreshes_in_the_background_and_goes_neutral_when_stale(prometheus):
    prometheus.set_node({"node": "node1"}, [1.0] * 4, 2.3e9)  # 4 idle cores
    prometheus.set_node({"node": "node2"}, [0.1] * 8, 2.3e9)  # 8 cores, 90 % busy
    telemetry = NodeTelemetry(ttl_s=0.6)
    extender = Extender(P90Scorer(CpuBoundRegressor()), default_catalog(), telemetry)
    config = ServiceConfig()
    app = create_extender_app(
        extender, config, PrometheusNodeSource(prometheus.url), refresh_interval_s=0.2
    )
    server = ServiceServer(app, config)
    url = server.start()
    args = load("extender_args_names.json")
    args["NodeNames"] = ["node1", "node2"]
    try:
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        scores = {h["Host"]: h["Score"] for h in httpx.post(f"{url}/prioritize", json=args).json()}
        assert scores["node1"] == 10 and scores["node2"] < 10  # 4 idle beat 0.8 effective
        calls = len(prometheus.queries)
        time.sleep(0.5)
        assert len(prometheus.queries) > calls  # refreshed periodically
        prometheus.down = True
        time.sleep(1.0)  # readings age past the 0.6 s TTL
        stale = httpx.post(f"{url}/prioritize", json=args).json()
        assert {h["Score"] for h in stale} == {NEUTRAL_SCORE}
        metrics = httpx.get(f"{url}/metrics").text
        assert 'hetsched_extender_neutral_nodes_total{why="stale"} 2.0' in metrics
        assert "hetsched_extender_telemetry_refresh_failures_total" in metrics
    finally:
        server.stop()


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://prometheus:9090", "prometheus:9090", "http://"]
)
def test_a_prometheus_url_that_is_not_http_is_refused_at_once(url):
    with pytest.raises(ConfigError, match="not an http"):
        PrometheusNodeSource(url)
