"""Prometheus metrics of the serving front, and the per-server telemetry the actors report.

The front process owns one registry. Request, queue and compute durations and the outcome
counters are recorded where they happen (front and HTTP layer); per-server gauges and counters
(utilisation, VRAM, power and energy with their measurement source, instance loads/unloads) are
read at scrape time from the latest :class:`ServerSnapshot` each actor reported, so ``/metrics``
never waits for an actor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "hetsched_slim"
DURATION_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Up to a minute: histogram_quantile needs buckets above the worst tail (LOCAL-SERVICES.md)."""


@dataclass(frozen=True)
class ServerSnapshot:
    """One server's telemetry as its actor reports it (units in every name)."""

    name: str
    up: bool
    queue_length: int
    utilization_pct: float
    vram_used_bytes: int
    power_w: float
    max_power_w: float
    energy_j: float
    """Energy since the actor started (a counter; it restarts from 0 with the actor)."""
    energy_source: str
    """How power and energy are measured: ``nvml``, ``rapl`` or ``model`` (the power model)."""
    instance_loads: int
    instance_unloads: int


class ServingMetrics:
    """Every metric of the serving front, in one registry (``/metrics`` renders it)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http_requests = Counter(
            f"{PREFIX}_http_requests",
            "HTTP requests by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            f"{PREFIX}_request_seconds",
            "Classify requests: arrival to response.",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.image_seconds = Histogram(
            f"{PREFIX}_image_seconds",
            "Images: acceptance to answer (all four segments).",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.queue_seconds = Histogram(
            f"{PREFIX}_queue_seconds",
            "Waits per segment: in the global FIFO (stage=fifo) or a server queue (executor).",
            ["stage"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.compute_seconds = Histogram(
            f"{PREFIX}_compute_seconds",
            "Duration of the batch that ran each segment.",
            ["server"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.images = Counter(
            f"{PREFIX}_images",
            "Accepted images by outcome (served or the failure reason).",
            ["outcome"],
            registry=r,
        )
        self.rejected = Counter(
            f"{PREFIX}_rejected_images",
            "Images refused by admission control, by reason.",
            ["reason"],
            registry=r,
        )
        self.dropped = Counter(
            f"{PREFIX}_dropped_images",
            "Accepted images answered with an error, by reason.",
            ["reason"],
            registry=r,
        )
        self.rerouted = Counter(
            f"{PREFIX}_rerouted_segments",
            "Segments sent again after a failure, by cause.",
            ["cause"],
            registry=r,
        )
        self.server_failures = Counter(
            f"{PREFIX}_server_failures", "Blocks lost to a dead server.", ["server"], registry=r
        )
        self.images_in_system = Gauge(
            f"{PREFIX}_images_in_system", "Accepted images not yet answered.", registry=r
        )
        self.fifo_length = Gauge(
            f"{PREFIX}_fifo_length", "Segment requests in the global FIFO.", registry=r
        )

    def watch_servers(self, snapshots: Callable[[], Sequence[ServerSnapshot]]) -> None:
        """Exports the per-server telemetry returned by ``snapshots`` at every scrape."""
        self.registry.register(_ServerCollector(snapshots))


class _ServerCollector(Collector):
    def __init__(self, snapshots: Callable[[], Sequence[ServerSnapshot]]) -> None:
        self._snapshots = snapshots

    def collect(self) -> Iterator[Metric]:
        def gauge(name: str, doc: str, labels: Sequence[str] = ("server",)) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"{PREFIX}_server_{name}", doc, labels=list(labels))

        up = gauge("up", "1 while the server serves, 0 while it is dead or restarting.")
        queue = gauge("queue_length", "Segment requests in the server's executor queue.")
        util = gauge("utilization_percent", "Compute utilisation, 0-100.")
        vram = gauge("vram_used_bytes", "Device memory in use.")
        power = gauge("power_watts", "Power draw.", ("server", "source"))
        energy = CounterMetricFamily(
            f"{PREFIX}_server_energy_joules",
            "Energy used since the server started.",
            labels=["server", "source"],
        )
        loads = CounterMetricFamily(
            f"{PREFIX}_server_instance_loads", "Segment instances loaded.", labels=["server"]
        )
        unloads = CounterMetricFamily(
            f"{PREFIX}_server_instance_unloads", "Segment instances unloaded.", labels=["server"]
        )
        for s in self._snapshots():
            up.add_metric([s.name], 1.0 if s.up else 0.0)
            queue.add_metric([s.name], s.queue_length)
            util.add_metric([s.name], s.utilization_pct)
            vram.add_metric([s.name], s.vram_used_bytes)
            power.add_metric([s.name, s.energy_source], s.power_w)
            energy.add_metric([s.name, s.energy_source], s.energy_j)
            loads.add_metric([s.name], s.instance_loads)
            unloads.add_metric([s.name], s.instance_unloads)
        yield from (up, queue, util, vram, power, energy, loads, unloads)
