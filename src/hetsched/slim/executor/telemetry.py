"""What a greedy executor reports: time series for the router's state and Prometheus metrics.

The paper's executor "samples utilization and emits telemetry data (utilization, VRAM, per-segment
queue sizes, latency percentiles) to support profiling and as input for PPO model training"
(section III.A). :class:`ExecutorTelemetry` is that record for one executor: counters, the
per-request queue and service durations (summarised with :func:`hetsched.core.metrics.summarize`),
and a time series sampled at most once per ``sample_interval_s`` whenever the executor acts (no
timer of its own, so a simulation ends when its work ends). :class:`ExecutorCollector` exposes
executors to Prometheus with Triton-like names and units; it reads the record at scrape time, so
serving a request costs a list append, not a metric update.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from hetsched.core.metrics import Summary, summarize
from hetsched.slim.executor.backend import ExecutorBackend

DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Histogram bucket bounds of the Prometheus durations (seconds)."""


@dataclass
class TelemetrySeries:
    """Samples of one executor over time (columns of equal length)."""

    time_s: list[float] = field(default_factory=list)
    queue_length: list[int] = field(default_factory=list)
    queue_by_segment: list[tuple[int, ...]] = field(default_factory=list)
    utilization_pct: list[float] = field(default_factory=list)
    vram_used_bytes: list[int] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)
    running_batches: list[int] = field(default_factory=list)
    instances_loaded: list[int] = field(default_factory=list)
    loads: list[int] = field(default_factory=list)
    """Instance loads so far (cumulative)."""
    unloads: list[int] = field(default_factory=list)
    """Instance unloads so far (cumulative)."""

    def as_dict(self) -> dict[str, list]:
        """Columns as plain lists, for JSON."""
        return {
            "time_s": self.time_s,
            "queue_length": self.queue_length,
            "queue_by_segment": [list(q) for q in self.queue_by_segment],
            "utilization_pct": self.utilization_pct,
            "vram_used_bytes": self.vram_used_bytes,
            "power_w": self.power_w,
            "running_batches": self.running_batches,
            "instances_loaded": self.instances_loaded,
            "loads": self.loads,
            "unloads": self.unloads,
        }


class ObservedExecutor(Protocol):
    """What the telemetry reads of an executor (the greedy executor is one): its state now.

    The telemetry depends on this view, not on the executor, so the executor can own its record.
    """

    name: str
    backend: ExecutorBackend
    vram_cap_bytes: int

    @property
    def record(self) -> ExecutorTelemetry: ...

    @property
    def queue_length(self) -> int: ...

    def queue_by_segment(self) -> tuple[int, ...]: ...

    @property
    def running_batches(self) -> int: ...

    @property
    def instances_loaded(self) -> int: ...

    def energy(self) -> tuple[float, str]: ...


class ExecutorTelemetry:
    """Counters, durations and the sampled series of one executor.

    Args:
        sample_interval_s: Least time between two samples of the series.
    """

    def __init__(self, sample_interval_s: float) -> None:
        self.sample_interval_s = sample_interval_s
        self.series = TelemetrySeries()
        self.queue_durations_s: list[float] = []
        """Per request: enqueue to the start of its batch."""
        self.request_durations_s: list[float] = []
        """Per request: enqueue to the end of its batch."""
        self.submitted = 0
        self.completed = 0
        self.batches = 0
        self.loads = 0
        self.unloads = 0
        self.peak_vram_bytes = 0
        """Highest VRAM in use seen at a batch start or a sample."""
        self.next_sample_s = float("-inf")
        """When the next sample is due (the executor then calls :meth:`sample`)."""

    def sample(self, now_s: float, executor: ObservedExecutor) -> None:
        """Appends one row of the series from the executor's and backend's state now."""
        self.next_sample_s = now_s + self.sample_interval_s
        backend = executor.backend
        vram_bytes = backend.vram_used_bytes()
        self.peak_vram_bytes = max(self.peak_vram_bytes, vram_bytes)
        series = self.series
        series.time_s.append(now_s)
        series.queue_length.append(executor.queue_length)
        series.queue_by_segment.append(executor.queue_by_segment())
        series.utilization_pct.append(backend.utilization_pct() or 0.0)
        series.vram_used_bytes.append(vram_bytes)
        series.power_w.append(backend.power_w())
        series.running_batches.append(executor.running_batches)
        series.instances_loaded.append(executor.instances_loaded)
        series.loads.append(self.loads)
        series.unloads.append(self.unloads)

    def queue_summary(self) -> Summary:
        """Queueing delay per request (mean, std, p50/p90/p99)."""
        return summarize(self.queue_durations_s)

    def latency_summary(self) -> Summary:
        """Time in the server per request, enqueue to batch end (mean, std, p50/p90/p99)."""
        return summarize(self.request_durations_s)


def _add_histogram(
    family: HistogramMetricFamily, labels: list[str], values: Sequence[float]
) -> None:
    """Adds one labelled histogram of ``values`` over :data:`DURATION_BUCKETS_S` to ``family``."""
    array = np.sort(np.asarray(values, dtype=float))
    counts = np.searchsorted(array, DURATION_BUCKETS_S, side="right")
    buckets = [(f"{b:g}", int(c)) for b, c in zip(DURATION_BUCKETS_S, counts, strict=True)]
    buckets.append(("+Inf", int(array.size)))
    family.add_metric(labels, buckets, float(array.sum()))


class ExecutorCollector:
    """Prometheus collector over executors (register on a registry the caller owns).

    Metrics (labels ``server``, ``device``; queue sizes also ``segment``, 1-based; energy also
    ``source``): ``hetsched_slim_queue_duration_seconds`` and
    ``hetsched_slim_request_duration_seconds`` (histograms), ``hetsched_slim_queue_size``,
    ``hetsched_slim_gpu_utilization_ratio``, ``hetsched_slim_gpu_memory_used_bytes``,
    ``hetsched_slim_gpu_memory_cap_bytes``, ``hetsched_slim_gpu_power_watts``,
    ``hetsched_slim_instances_loaded`` (gauges), ``hetsched_slim_energy_joules_total``,
    ``hetsched_slim_instance_loads_total``, ``hetsched_slim_instance_unloads_total``,
    ``hetsched_slim_requests_total``, ``hetsched_slim_batches_total`` (counters).
    """

    def __init__(self, executors: Sequence[ObservedExecutor]) -> None:
        self.executors = list(executors)

    def collect(self) -> Iterator[Any]:
        """Builds every family from the executors' state now (called by the registry)."""
        gauges = {
            "gpu_utilization_ratio": "Compute utilisation of the device, 0-1.",
            "gpu_memory_used_bytes": "Device memory in use: loaded instances and activations.",
            "gpu_memory_cap_bytes": "The executor's VRAM cap M_max.",
            "gpu_power_watts": "Power draw of the device now.",
            "instances_loaded": "Segment instances loaded on the device.",
        }
        counters = {
            "instance_loads": "Instances loaded (Algorithm 1 CANLOAD successes).",
            "instance_unloads": "Instances offloaded after t_idle (UNLOADERLOOP).",
            "requests": "Segment requests completed.",
            "batches": "Batches run.",
        }
        gauge_families = {
            key: GaugeMetricFamily(f"hetsched_slim_{key}", doc, labels=["server", "device"])
            for key, doc in gauges.items()
        }
        counter_families = {
            key: CounterMetricFamily(f"hetsched_slim_{key}", doc, labels=["server", "device"])
            for key, doc in counters.items()
        }
        queue_sizes = GaugeMetricFamily(
            "hetsched_slim_queue_size",
            "Segment requests waiting in the executor FIFO, per segment.",
            labels=["server", "device", "segment"],
        )
        energy = CounterMetricFamily(
            "hetsched_slim_energy_joules",
            "Energy used by the device, with where the figure comes from.",
            labels=["server", "device", "source"],
        )
        queue_durations = HistogramMetricFamily(
            "hetsched_slim_queue_duration_seconds",
            "Time a segment request waited in the executor FIFO.",
            labels=["server", "device"],
        )
        request_durations = HistogramMetricFamily(
            "hetsched_slim_request_duration_seconds",
            "Time from enqueue to the end of a segment request's batch.",
            labels=["server", "device"],
        )
        for executor in self.executors:
            labels = [executor.name, executor.backend.name]
            backend, telemetry = executor.backend, executor.record
            values = {
                "gpu_utilization_ratio": (backend.utilization_pct() or 0.0) / 100.0,
                "gpu_memory_used_bytes": backend.vram_used_bytes(),
                "gpu_memory_cap_bytes": executor.vram_cap_bytes,
                "gpu_power_watts": backend.power_w(),
                "instances_loaded": executor.instances_loaded,
            }
            for key, value in values.items():
                gauge_families[key].add_metric(labels, float(value))
            counts = {
                "instance_loads": telemetry.loads,
                "instance_unloads": telemetry.unloads,
                "requests": telemetry.completed,
                "batches": telemetry.batches,
            }
            for key, value in counts.items():
                counter_families[key].add_metric(labels, float(value))
            for segment, size in enumerate(executor.queue_by_segment()):
                queue_sizes.add_metric([*labels, str(segment + 1)], float(size))
            energy_j, source = executor.energy()
            energy.add_metric([*labels, source], energy_j)
            _add_histogram(queue_durations, labels, telemetry.queue_durations_s)
            _add_histogram(request_durations, labels, telemetry.request_durations_s)
        yield queue_durations
        yield request_durations
        yield from gauge_families.values()
        yield from counter_families.values()
        yield queue_sizes
        yield energy


def register_metrics(registry: CollectorRegistry, executors: Sequence[ObservedExecutor]) -> None:
    """Exposes ``executors`` on ``registry`` (pass a fresh registry per server or test)."""
    registry.register(ExecutorCollector(executors))
