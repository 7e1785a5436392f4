"""Measurement harness: real models served single-stream by MLPerf LoadGen on emulated nodes.

An emulated node is a worker process pinned (``sched_setaffinity``) to a subset of this machine's
cores, with as many torch threads as cores. Background contention is busy-loop processes pinned to
the same cores, each busy for ``duty`` of every 10 ms period. For each (model, node, contention)
the worker runs a LoadGen SingleStream test and reports every query's latency; P90 is the sorted
latency at index int(0.9 n) (eq. 10, MLPerf's definition). The node features (eqs. 6-8) are sampled
with psutil while the contention runs and before the model starts, as a scheduler would see them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import dataclass

from hetsched.tail.node_features import local_capacity

CONTENTION_PERIOD_S = 0.01
# psutil sampling window for the node features at arrival (long enough to average out jitter).
FEATURE_WINDOW_S = 1.0
# Histogram buckets (s) reaching far above the worst tail, so histogram_quantile stays bounded.
LATENCY_BUCKETS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.75,
    1.0,
    1.5,
    2.5,
    5.0,
    10.0,
    30.0,
)


@dataclass(frozen=True)
class EmulatedNode:
    """A node emulated as a set of this machine's cores at a nominal clock."""

    name: str
    cores: tuple[int, ...]
    freq_ghz: float


def p90(latencies_s: list[float]) -> float:
    """Eq. 10 as MLPerf computes it: the sorted latency at index int(0.9 n)."""
    ordered = sorted(latencies_s)
    return ordered[int(0.9 * len(ordered))]


def _busy_loop(cores: tuple[int, ...], duty: float, stop) -> None:
    os.sched_setaffinity(0, cores)
    busy_s = duty * CONTENTION_PERIOD_S
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < busy_s:
            pass
        time.sleep(max(CONTENTION_PERIOD_S - busy_s, 0.0))


class Contention:
    """Context manager running one busy-loop process per node core at the given duty cycle."""

    def __init__(self, cores: tuple[int, ...], duty: float) -> None:
        self.cores, self.duty = cores, duty
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list = []

    def __enter__(self) -> Contention:
        if self.duty > 0:
            for core in self.cores:
                proc = self._ctx.Process(target=_busy_loop, args=((core,), self.duty, self._stop))
                proc.start()
                self._procs.append(proc)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


def _serve_single_stream(model_name: str, cores: tuple[int, ...], queries: int, out) -> None:
    """Worker body: pin, build the model, run LoadGen SingleStream, return latencies."""
    import mlperf_loadgen as lg
    import torch

    from hetsched.tail.zoo import build_model

    os.sched_setaffinity(0, cores)
    torch.set_num_threads(len(cores))
    model, shape = build_model(model_name)
    sample = torch.randn(shape)
    latencies: list[float] = []
    with torch.no_grad():
        model(sample)  # warm-up, outside the measured queries

        def issue(query_samples) -> None:
            for q in query_samples:
                start = time.perf_counter()
                with torch.no_grad():
                    model(sample)
                latencies.append(time.perf_counter() - start)
                lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0)])

        settings = lg.TestSettings()
        settings.scenario = lg.TestScenario.SingleStream
        settings.mode = lg.TestMode.PerformanceOnly
        settings.min_query_count = queries
        settings.max_query_count = queries
        settings.min_duration_ms = 0
        settings.single_stream_expected_latency_ns = 10_000_000
        log = lg.LogSettings()
        with tempfile.TemporaryDirectory() as tmp:
            log.log_output.outdir = tmp
            log.log_output.copy_summary_to_stdout = False
            sut = lg.ConstructSUT(issue, lambda: None)
            qsl = lg.ConstructQSL(1, 1, lambda s: None, lambda s: None)
            lg.StartTestWithLogSettings(sut, qsl, settings, log)
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
    out.put(latencies)


def measure_one(model_name: str, node: EmulatedNode, duty: float, queries: int) -> dict:
    """One (model, node, contention) point: features at arrival, then LoadGen latencies and P90."""
    from hetsched.tail.models import resolve_model_features

    features = resolve_model_features(model_name)
    ctx = mp.get_context("spawn")
    with Contention(node.cores, duty):
        time.sleep(0.2)
        capacity = local_capacity(
            node.name, list(node.cores), window_s=FEATURE_WINDOW_S, freq_ghz=node.freq_ghz
        )
        queue = ctx.Queue()
        worker = ctx.Process(
            target=_serve_single_stream, args=(model_name, node.cores, queries, queue)
        )
        worker.start()
        latencies = queue.get(timeout=600)
        worker.join()
    return {
        "timestamp_s": time.time(),
        "model": model_name,
        "size_mb": features.size_mb,
        "flops": features.flops,
        "node": node.name,
        "cores": capacity.cores,
        "freq_ghz": capacity.freq_ghz,
        "contention_duty": duty,
        "u_cores": capacity.u_cores,
        "u_freq": capacity.u_freq,
        "cpu_eff": capacity.cpu_eff,
        "freq_eff_ghz": capacity.freq_eff_ghz,
        "queries": len(latencies),
        "mean_s": sum(latencies) / len(latencies),
        "p90_s": p90(latencies),
        "latencies_s": latencies,
    }


class LatencyExporter:
    """Prometheus exposition of measured latencies (histogram) and the features beside them."""

    def __init__(self, port: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server

        self.registry = CollectorRegistry()
        labels = ["model", "node"]
        self.latency = Histogram(
            "hetsched_inference_latency_seconds",
            "Single-stream query latency",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.gauges = {
            key: Gauge(f"hetsched_{key}", f"Feature {key}", labels, registry=self.registry)
            for key in ("size_mb", "flops", "cpu_eff", "freq_eff_ghz")
        }
        self.server, self.thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)

    def record(self, row: dict) -> None:
        labels = {"model": row["model"], "node": row["node"]}
        for key, gauge in self.gauges.items():
            gauge.labels(**labels).set(row[key])
        for latency in row["latencies_s"]:
            self.latency.labels(**labels).observe(latency)

    def close(self) -> None:
        self.server.shutdown()


CSV_COLUMNS = (
    "timestamp_s",
    "model",
    "size_mb",
    "flops",
    "node",
    "cores",
    "freq_ghz",
    "contention_duty",
    "u_cores",
    "u_freq",
    "cpu_eff",
    "freq_eff_ghz",
    "queries",
    "mean_s",
    "p90_s",
)


def measure_grid(
    models: dict[str, int],
    nodes: list[EmulatedNode],
    duties: list[float],
    repeats: int = 1,
    exporter: LatencyExporter | None = None,
) -> list[dict]:
    """Measures every (model, node, duty) ``repeats`` times; ``models`` maps name -> queries."""
    from rich.progress import track

    points = [(m, n, d) for _ in range(repeats) for m in models for n in nodes for d in duties]
    rows = []
    for model, node, duty in track(points, description="measuring"):
        row = measure_one(model, node, duty, models[model])
        if exporter is not None:
            exporter.record(row)
        rows.append({k: row[k] for k in CSV_COLUMNS})
    return rows


def write_csv(rows: list[dict], path) -> None:
    """Writes measurement rows with the fixed column order of :data:`CSV_COLUMNS`."""
    import csv
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
