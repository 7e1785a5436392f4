"""The harness's measurement worker: one long-lived process serving LoadGen runs on request.

torch is imported once per worker (a cold import takes ~10 s on a loaded VM). Per point the worker
pins itself (``sched_setaffinity``) to the node's cores, sets torch's intra-op threads, warms the
model up and runs an MLPerf LoadGen SingleStream test of exactly the asked number of queries. Around
the measured queries it reads CPU-time counters (the node's cores and its own), not a polling
thread, so the sampler costs no CPU on the cores it measures.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time

from hetsched.core.errors import HetschedError
from hetsched.tail.contention import ignore_ctrl_c
from hetsched.tail.zoo import build_model

# psutil cpu_times fields that Linux already includes in user / nice.
GUEST_FIELDS = ("guest", "guest_nice")


# Seconds to wait for one point's queries before declaring the worker stuck.
POINT_TIMEOUT_S = 600.0


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
    ignore_ctrl_c()
    import psutil
    import torch

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
            # The pod's own CPU time from the kernel's per-process clock (nanoseconds): psutil's
            # process times count whole clock ticks (10 ms), which a run of a few fast queries
            # can finish inside, reading a share of 0.
            cpu_before, own_before_s = psutil.cpu_times(percpu=True), time.process_time()
            start = time.perf_counter()
            latencies = _loadgen_single_stream(model, sample, queries)
            wall_s = time.perf_counter() - start
            cpu_after, own_cpu_s = psutil.cpu_times(percpu=True), time.process_time() - own_before_s
            node_busy_s = sum(
                core_busy_s(cpu_before[c]._asdict(), cpu_after[c]._asdict()) for c in cores
            )
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
