"""Measurement harness: real models served single-stream by MLPerf LoadGen on emulated nodes.

An emulated node is a set of this machine's cores at a nominal clock. One long-lived worker
process (torch is imported once: a cold import takes ~10 s on this loaded VM) serves every point:
per point it pins itself (``sched_setaffinity``) to the node's cores, sets torch's intra-op
threads (the node's core count, or fewer: on a shared 2-core VM two threads stall whenever
outside load lands on one core), and runs a LoadGen SingleStream test. Background contention is
busy-loop processes pinned to the node's cores, each busy for ``duty`` of every 10 ms period.
P90 is the sorted latency at index int(0.9 n) (eq. 10, MLPerf's definition).

The node features (eqs. 6-8) are taken twice per point:

- at arrival: psutil over a short window with the contention running and the model not yet
  started, as a scheduler sees the node before placing the pod;
- during the run: CPU-time counters read by the worker right before and after the measured
  queries, minus the worker's own CPU time, i.e. the load of everything *else* on the node while
  the queries ran (what the paper's Prometheus samples see beside the pod). Counters, not a
  polling thread, so the sampler costs no CPU on the cores it measures.

The contention's achieved duty (its processes' CPU seconds per wall second), the pod's own CPU
share and the 1-minute load average are recorded too, so a point says how much outside load it
really had. On a saturated node (outside load + pod = every core busy) the during-run outside load
is 1 − the pod's share: the during-run features then carry the CPU the pod itself received, which
no scheduler can observe before placing it; the arrival features are free of that.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.node_features import NodeCapacity, local_capacity

CONTENTION_PERIOD_S = 0.01
# psutil sampling window for the node features at arrival (long enough to average out jitter).
FEATURE_WINDOW_S = 0.5
# psutil cpu_times fields that Linux already includes in user / nice.
GUEST_FIELDS = ("guest", "guest_nice")
# Seconds to wait for one point's queries before declaring the worker stuck.
POINT_TIMEOUT_S = 600.0
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


def core_busy_s(before: dict[str, float], after: dict[str, float]) -> float:
    """Busy seconds of one core between two psutil ``cpu_times`` readings (as dicts).

    Busy is everything but idle and iowait; steal counts as busy, because on a VM it is time the
    hypervisor gave to someone else, which the pod cannot use either. Linux already counts guest
    time inside user and nice, so the guest fields are left out of the total.
    """
    total = sum(v for k, v in after.items() if k not in GUEST_FIELDS) - sum(
        v for k, v in before.items() if k not in GUEST_FIELDS
    )
    idle = (after["idle"] - before["idle"]) + (after.get("iowait", 0.0) - before.get("iowait", 0.0))
    return max(total - idle, 0.0)


def outside_utilisation(node_busy_s: float, own_cpu_s: float, cores: int, wall_s: float) -> float:
    """U of everything except the measured pod on a node during a run (input to eqs. 6-7).

    Args:
        node_busy_s: busy CPU seconds summed over the node's cores in the window.
        own_cpu_s: the pod's own CPU seconds in the window (it runs only on these cores).
        cores: the node's core count.
        wall_s: the window's length.
    """
    if cores < 1 or wall_s <= 0:
        raise DataError(f"need cores >= 1 and a positive window, got {cores} and {wall_s}")
    return min(max((node_busy_s - own_cpu_s) / (cores * wall_s), 0.0), 1.0)


def achieved_duty(cpu_s: float, processes: int, wall_s: float) -> float:
    """CPU seconds per wall second per busy-loop process: the duty the contention really got."""
    if processes < 1 or wall_s <= 0:
        raise DataError(f"need processes >= 1 and a positive window, got {processes}, {wall_s}")
    return cpu_s / (processes * wall_s)


def _ignore_ctrl_c() -> None:
    """Child processes leave Ctrl-C to the parent, which stops them.

    Otherwise a busy loop interrupted inside ``stop.is_set()`` dies holding the event's lock, and
    the parent's ``stop.set()`` then waits for that lock forever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _busy_loop(cores: tuple[int, ...], duty: float, stop) -> None:
    _ignore_ctrl_c()
    os.sched_setaffinity(0, cores)
    busy_s = duty * CONTENTION_PERIOD_S
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < busy_s:
            pass
        time.sleep(max(CONTENTION_PERIOD_S - busy_s, 0.0))


class Contention:
    """Context manager running one busy-loop process per node core at the given duty cycle.

    The loop is busy by wall clock, so a preempted loop gets less CPU than ``duty``;
    :meth:`cpu_seconds` lets the caller check what it really consumed.
    """

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

    @property
    def processes(self) -> int:
        return len(self._procs)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds consumed so far by the busy-loop processes."""
        import psutil

        total = 0.0
        for proc in self._procs:
            times = psutil.Process(proc.pid).cpu_times()
            total += times.user + times.system
        return total

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


def _loadgen_single_stream(model, sample, queries: int) -> list[float]:
    """One LoadGen SingleStream performance run of exactly ``queries`` queries."""
    import mlperf_loadgen as lg
    import torch

    latencies: list[float] = []

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
    return latencies


def _serve_points(commands, results) -> None:
    """Worker body: per command pin, set threads, warm up, run LoadGen, report counters."""
    _ignore_ctrl_c()
    import psutil
    import torch

    from hetsched.tail.zoo import build_model

    me = psutil.Process()
    models: dict[str, tuple] = {}
    for model_name, cores, threads, queries in iter(commands.get, None):
        try:
            os.sched_setaffinity(0, cores)
            torch.set_num_threads(threads)
            if model_name not in models:
                models[model_name] = build_model(model_name)
            model, shape = models[model_name]
            sample = torch.randn(shape)
            with torch.no_grad():
                for _ in range(2):  # warm-up after the thread change, outside the measurement
                    model(sample)
            cpu_before, own_before = psutil.cpu_times(percpu=True), me.cpu_times()
            start = time.perf_counter()
            latencies = _loadgen_single_stream(model, sample, queries)
            wall_s = time.perf_counter() - start
            cpu_after, own_after = psutil.cpu_times(percpu=True), me.cpu_times()
            node_busy_s = sum(
                core_busy_s(cpu_before[c]._asdict(), cpu_after[c]._asdict()) for c in cores
            )
            own_cpu_s = (own_after.user + own_after.system) - (own_before.user + own_before.system)
            results.put(
                {
                    "latencies_s": latencies,
                    "node_busy_s": node_busy_s,
                    "own_cpu_s": own_cpu_s,
                    "wall_s": wall_s,
                }
            )
        except Exception as error:  # forwarded to the parent, which raises it
            results.put({"error": repr(error)})


class MeasurementWorker:
    """A long-lived worker process that runs measurement points on request (context manager)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._commands, self._results = ctx.Queue(), ctx.Queue()
        self._proc = ctx.Process(
            target=_serve_points, args=(self._commands, self._results), daemon=True
        )

    def __enter__(self) -> MeasurementWorker:
        self._proc.start()
        return self

    def run(self, model_name: str, cores: tuple[int, ...], threads: int, queries: int) -> dict:
        """Runs one point; returns latencies and the CPU-time counters of the run window."""
        self._commands.put((model_name, cores, threads, queries))
        result = self._results.get(timeout=POINT_TIMEOUT_S)
        if "error" in result:
            raise HetschedError(f"measurement of {model_name} failed: {result['error']}")
        return result

    def __exit__(self, *exc) -> None:
        self._commands.put(None)
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.terminate()


def measure_one(
    worker: MeasurementWorker,
    model_name: str,
    node: EmulatedNode,
    duty: float,
    queries: int,
    torch_threads: int = 0,
) -> dict:
    """One (model, node, contention) point: features at arrival, LoadGen latencies and P90, and
    the outside load during the run. ``torch_threads`` 0 means one thread per node core."""
    from hetsched.tail.models import resolve_model_features

    threads = torch_threads or len(node.cores)
    if not 1 <= threads <= len(node.cores):
        raise HetschedError(f"torch threads must be 1..{len(node.cores)}, got {threads}")
    features = resolve_model_features(model_name)
    with Contention(node.cores, duty) as contention:
        time.sleep(0.2)
        arrival = local_capacity(
            node.name, list(node.cores), window_s=FEATURE_WINDOW_S, freq_ghz=node.freq_ghz
        )
        contention_cpu_s, start = contention.cpu_seconds(), time.perf_counter()
        run = worker.run(model_name, node.cores, threads, queries)
        contention_wall_s = time.perf_counter() - start
        achieved = (
            achieved_duty(
                contention.cpu_seconds() - contention_cpu_s,
                contention.processes,
                contention_wall_s,
            )
            if contention.processes
            else 0.0
        )
    cores = len(node.cores)
    u_run = outside_utilisation(run["node_busy_s"], run["own_cpu_s"], cores, run["wall_s"])
    during = NodeCapacity(node.name, len(node.cores), node.freq_ghz, u_run, u_run)
    latencies = run["latencies_s"]
    return {
        "timestamp_s": time.time(),
        "model": model_name,
        "size_mb": features.size_mb,
        "flops": features.flops,
        "node": node.name,
        "cores": during.cores,
        "freq_ghz": during.freq_ghz,
        "torch_threads": threads,
        "contention_duty": duty,
        "contention_achieved": achieved,
        "load1": os.getloadavg()[0],
        "u_arrival": arrival.u_cores,
        "cpu_eff_arrival": arrival.cpu_eff,
        "freq_eff_arrival_ghz": arrival.freq_eff_ghz,
        "pod_cpu_share": run["own_cpu_s"] / (cores * run["wall_s"]),
        "u_cores": during.u_cores,
        "u_freq": during.u_freq,
        "cpu_eff": during.cpu_eff,
        "freq_eff_ghz": during.freq_eff_ghz,
        "run_s": run["wall_s"],
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
    "torch_threads",
    "contention_duty",
    "contention_achieved",
    "load1",
    "u_arrival",
    "cpu_eff_arrival",
    "freq_eff_arrival_ghz",
    "pod_cpu_share",
    "u_cores",
    "u_freq",
    "cpu_eff",
    "freq_eff_ghz",
    "run_s",
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
    torch_threads: int = 0,
    seed: int = 0,
    out_csv: Path | None = None,
) -> list[dict]:
    """Measures every (model, node, duty) ``repeats`` times; ``models`` maps name -> queries.

    Each repeat is one pass over the grid in a seeded random order, so a drift in the machine's
    outside load lands on all cells alike instead of on the last models or duties. With
    ``out_csv`` every row is appended (and flushed) as soon as it is measured: a long run that is
    interrupted keeps the points it already has.
    """
    import csv

    import numpy as np
    from rich.progress import track

    rng = np.random.default_rng(seed)
    grid = [(m, n, d) for m in models for n in nodes for d in duties]
    points = [grid[i] for _ in range(repeats) for i in rng.permutation(len(grid))]
    rows = []
    with MeasurementWorker() as worker, _csv_sink(out_csv) as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS) if handle else None
        if writer:
            writer.writeheader()
        for model, node, duty in track(points, description="measuring"):
            row = measure_one(worker, model, node, duty, models[model], torch_threads)
            if exporter is not None:
                exporter.record(row)
            rows.append({k: row[k] for k in CSV_COLUMNS})
            if writer:
                writer.writerow(rows[-1])
                handle.flush()
    return rows


def _csv_sink(path: Path | None):
    """An open text file for ``path`` (its folder created), or a null context for None."""
    if path is None:
        return contextlib.nullcontext()
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", newline="")
