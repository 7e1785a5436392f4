"""One Slim server under a generated workload: ``hetsched slim run-server``.

A single greedy executor (Algorithm 1) on one device, fed a seeded stream of segment requests
(random segments and widths at rate r, Poisson or bursty; :mod:`hetsched.slim.sim.workload`), run to
the last completion; the report holds throughput, latency percentiles, utilisation, VRAM peak,
energy with its source, and instance loads/unloads, plus the telemetry series and the Prometheus
exposition of the run. :func:`open_server` is the one place a backend (and its clock) is chosen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from prometheus_client import CollectorRegistry, generate_latest
from rich.table import Table

from hetsched.core.devices import load_device
from hetsched.core.errors import ConfigError
from hetsched.core.events import EventLoop
from hetsched.core.metrics import Summary
from hetsched.core.realtime import RealTimeLoop
from hetsched.slim.executor.backend import ExecutorBackend
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.executor.telemetry import register_metrics
from hetsched.slim.live.devices import random_activations
from hetsched.slim.live.torch_backend import TorchBackend
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.sim.scenario import model_costs
from hetsched.slim.sim.simulated_backend import SimulatedBackend
from hetsched.slim.sim.workload import (
    Pattern,
    SegmentWorkload,
    drive,
    replay,
    segment_workload,
)


@dataclass
class OpenServer:
    """A backend, the clock it runs on, how to feed it a workload and how to run the clock."""

    backend: ExecutorBackend
    clock: Any
    feed: Callable[[SegmentWorkload, GreedyExecutor, Callable[[float], None]], None]
    """Submits a workload's requests at their arrival times (it may run the clock meanwhile)."""
    run_until: Callable[[Callable[[], bool]], None]
    """Runs the clock until the condition holds."""


def open_server(device: str, *, sim: bool) -> OpenServer:
    """The backend of ``run-server``: with ``sim``, the simulated twin of ``device`` (a built-in
    name or a profile JSON) on a fresh event loop; without, the live backend on ``device``
    (``cpu``, ``cuda:N``) on a real-time loop (:func:`open_live_server`).

    Raises:
        HetschedError: For an unknown device, or a live device this machine lacks.
    """
    if not sim:
        return open_live_server(device)
    spec = load_device(device)
    loop = EventLoop()
    backend = SimulatedBackend(spec, model_costs(), loop)

    def feed(
        workload: SegmentWorkload, server: GreedyExecutor, done: Callable[[float], None]
    ) -> None:
        replay(workload, server, loop, done)

    def run_until(finished: Callable[[], bool]) -> None:
        while not finished() and loop.step():
            pass

    return OpenServer(backend, loop, feed, run_until)


class _WithActivations:
    """Gives each generated request a payload: a random activation of its (segment, w_prev).

    A generated workload has no images, but live segments need real tensors; latency does not
    depend on their values, so one random activation per (segment, w_prev) serves every request.
    """

    def __init__(self, server: GreedyExecutor, image_size: int) -> None:
        self._server = server
        self._image_size = image_size
        self._activations: dict[tuple[int, float | None], Any] = {}

    def submit(
        self, segment: int, width: float, prev_width: float | None, done: Callable[[float], None]
    ) -> None:
        key = (segment, prev_width)
        if key not in self._activations:
            batch = random_activations(segment, prev_width or 1.0, 1, self._image_size)
            self._activations[key] = batch[0]
        self._server.submit(
            segment,
            width,
            prev_width,
            lambda executed, _output: done(executed),
            payload=self._activations[key],
        )


def open_live_server(device: str, image_size: int = 32) -> OpenServer:
    """The live backend: SlimResNet segments on ``device`` on a real-time loop.

    The model has seeded random weights of the CIFAR-100 shape (100 classes, ``image_size``
    pixels): the same segments the simulated twin costs, and latency does not depend on weights.
    """
    loop = RealTimeLoop()
    torch.manual_seed(0)
    try:
        backend = TorchBackend(SlimResNet(num_classes=100), loop, device)
    except ConfigError as error:
        raise ConfigError(f"run-server without --sim runs live: {error}") from None

    def feed(
        workload: SegmentWorkload, server: GreedyExecutor, done: Callable[[float], None]
    ) -> None:
        drive(workload, _WithActivations(server, image_size), loop, done)

    def run_until(finished: Callable[[], bool]) -> None:
        loop.run_until(finished)

    return OpenServer(backend, loop, feed, run_until)


@dataclass
class ServerReport:
    """What one run measured (times in seconds on the server's clock)."""

    device: str
    backend: str
    pattern: str
    rate_per_s: float
    duration_s: float
    seed: int
    requests_submitted: int
    requests_completed: int
    makespan_s: float
    throughput_per_s: float
    latency_s: Summary
    """Enqueue to the end of the request's batch."""
    queue_s: Summary
    """Enqueue to the start of the request's batch."""
    utilization_mean_pct: float
    """Time-weighted mean of the sampled utilisation series."""
    utilization_peak_pct: float
    vram_peak_bytes: int
    energy_j: float
    energy_source: str
    loads: int
    unloads: int
    batches: int
    mean_batch_size: float

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def time_weighted_mean(times_s: list[float], values: list[float], end_s: float) -> float:
    """Mean of a piecewise-constant series (each sample holds until the next) up to ``end_s``."""
    if not times_s:
        return float("nan")
    edges = np.append(np.asarray(times_s, dtype=float), max(end_s, times_s[-1]))
    spans = np.diff(edges)
    if spans.sum() <= 0:
        return float(np.mean(values))
    return float(np.dot(spans, values) / spans.sum())


def run_server(
    device: str,
    config: ExecutorConfig,
    *,
    pattern: Pattern,
    duration_s: float,
    seed: int,
    sim: bool,
) -> tuple[ServerReport, GreedyExecutor]:
    """Runs one executor under the seeded workload until every request completed."""
    server = open_server(device, sim=sim)
    executor = GreedyExecutor(server.backend, server.clock, config)
    workload = segment_workload(seed, config.arrival_rate_per_s, pattern, duration_s, config.widths)
    start_s = server.clock.now_s()
    finished = [0]

    def done(_width: float) -> None:
        finished[0] += 1

    server.feed(workload, executor, done)
    server.run_until(lambda: finished[0] >= len(workload))
    end_s = server.clock.now_s()
    executor.record.sample(end_s, executor)
    record, series = executor.record, executor.record.series
    makespan_s = end_s - start_s
    energy_j, energy_source = executor.energy()
    report = ServerReport(
        device=server.backend.name,
        backend="sim" if sim else "live",
        pattern=pattern,
        rate_per_s=config.arrival_rate_per_s,
        duration_s=duration_s,
        seed=seed,
        requests_submitted=len(workload),
        requests_completed=record.completed,
        makespan_s=makespan_s,
        throughput_per_s=record.completed / makespan_s if makespan_s > 0 else float("nan"),
        latency_s=record.latency_summary(),
        queue_s=record.queue_summary(),
        utilization_mean_pct=time_weighted_mean(series.time_s, series.utilization_pct, end_s),
        utilization_peak_pct=max(series.utilization_pct, default=0.0),
        vram_peak_bytes=record.peak_vram_bytes,
        energy_j=energy_j,
        energy_source=energy_source,
        loads=record.loads,
        unloads=record.unloads,
        batches=record.batches,
        mean_batch_size=record.completed / record.batches if record.batches else 0.0,
    )
    return report, executor


def report_table(report: ServerReport) -> Table:
    """The report as a rich table (one metric per row)."""
    latency, queue = report.latency_s, report.queue_s
    table = Table(
        title=f"run-server {report.backend} {report.device}: {report.pattern} at"
        f" {report.rate_per_s:g}/s for {report.duration_s:g} s, seed {report.seed}"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        (
            "requests completed / submitted",
            f"{report.requests_completed} / {report.requests_submitted}",
        ),
        ("throughput (requests/s)", f"{report.throughput_per_s:.1f}"),
        ("latency p50 / p90 / p99 (ms)", _millis(latency.p50, latency.p90, latency.p99)),
        ("latency mean ± std (ms)", f"{1e3 * latency.mean:.2f} ± {1e3 * latency.std:.2f}"),
        ("queueing p50 / p99 (ms)", _millis(queue.p50, queue.p99)),
        (
            "utilisation mean / peak (%)",
            f"{report.utilization_mean_pct:.1f} / {report.utilization_peak_pct:.1f}",
        ),
        ("VRAM peak (MiB)", f"{report.vram_peak_bytes / 2**20:.1f}"),
        ("energy (J)", f"{report.energy_j:.1f} (source: {report.energy_source})"),
        ("batches (mean size)", f"{report.batches} ({report.mean_batch_size:.2f})"),
        ("instance loads / unloads", f"{report.loads} / {report.unloads}"),
        ("makespan (s)", f"{report.makespan_s:.3f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def save_run(
    out_dir: Path, config: ExecutorConfig, report: ServerReport, executor: GreedyExecutor
) -> tuple[Path, Path]:
    """Writes ``OUT/run-server.json`` (config, report, sampled series) and ``OUT/metrics.prom``
    (the executor's Prometheus metrics now); returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "config": config.model_dump(),
        "report": report.as_dict(),
        "series": executor.record.series.as_dict(),
    }
    json_path = out_dir / "run-server.json"
    json_path.write_text(json.dumps(result, indent=1))
    registry = CollectorRegistry()
    register_metrics(registry, [executor])
    metrics_path = out_dir / "metrics.prom"
    metrics_path.write_bytes(generate_latest(registry))
    return json_path, metrics_path


def _millis(*seconds: float) -> str:
    return " / ".join(f"{1e3 * s:.2f}" for s in seconds)
