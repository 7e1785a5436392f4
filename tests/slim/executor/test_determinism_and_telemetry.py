"""Seeded runs repeat exactly; telemetry series and Prometheus metrics report what happened."""

import json

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from hetsched.core.events import EventLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.telemetry import register_metrics
from hetsched.slim.experiments.run_server import run_server, time_weighted_mean
from hetsched.slim.sim.workload import drive, segment_workload
from tests.slim.executor.conftest import WIDTHS, make_executor


def trace(seed, pattern):
    report, executor = run_server(
        "gtx-980-ti",
        ExecutorConfig(arrival_rate_per_s=4000.0, idle_unload_s=0.05),
        pattern=pattern,
        duration_s=0.5,
        seed=seed,
        sim=True,
    )
    return json.dumps(
        {
            "report": report.as_dict(),
            "series": executor.record.series.as_dict(),
            "latencies": executor.record.request_durations_s,
        }
    )


@pytest.mark.parametrize("pattern", ["poisson", "bursty"])
def test_same_seed_same_results_other_seed_other_results(pattern):
    first = trace(3, pattern)
    assert first == trace(3, pattern)
    assert first != trace(4, pattern)


def test_series_and_prometheus_metrics_match_the_run(costs):
    loop, executor, _ = make_executor(costs, checked=False, sample_interval_s=0.001)
    workload = segment_workload(1, 3000.0, "bursty", 0.3, WIDTHS)
    drive(workload, executor, loop, lambda width: None)
    loop.run()
    record = executor.record
    assert record.completed == record.submitted == len(workload)
    assert record.loads == record.unloads > 0  # the idle instances were offloaded at the end
    series = record.series
    assert len(series.time_s) > 10 and series.time_s == sorted(series.time_s)
    assert max(series.queue_length) > 0 and series.queue_length[-1] == 0
    assert series.loads == sorted(series.loads) and series.loads[-1] <= record.loads
    rows = zip(series.queue_by_segment, series.queue_length, strict=True)
    assert all(sum(per_segment) == total for per_segment, total in rows)
    assert record.latency_summary().p99 >= record.latency_summary().p50 > 0
    registry = CollectorRegistry()
    register_metrics(registry, [executor])
    text = generate_latest(registry).decode()
    labels = {"server": executor.name, "device": executor.backend.name}

    def value(name, **extra):
        return registry.get_sample_value(name, {**labels, **extra})

    assert value("hetsched_slim_requests_total") == len(workload)
    assert value("hetsched_slim_queue_duration_seconds_count") == len(workload)
    assert value("hetsched_slim_instance_loads_total") == record.loads
    assert value("hetsched_slim_energy_joules_total", source="model") == pytest.approx(
        executor.energy()[0]
    )
    assert value("hetsched_slim_gpu_utilization_ratio") == 0.0
    assert value("hetsched_slim_queue_size", segment="1") == 0.0
    assert "hetsched_slim_gpu_memory_used_bytes" in text
    # A second registry is independent: no clash with the global one or between tests.
    register_metrics(CollectorRegistry(), [executor])


def test_time_weighted_mean_holds_each_sample_until_the_next():
    assert time_weighted_mean([0.0, 1.0], [100.0, 0.0], end_s=4.0) == pytest.approx(25.0)
    assert np.isnan(time_weighted_mean([], [], end_s=1.0))


def test_cluster_payloads_travel_through_the_executors(costs):
    from hetsched.core.devices import DEVICES
    from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
    from hetsched.slim.cluster.slim_cluster import ClusterConfig, SlimCluster
    from hetsched.slim.executor.greedy import GreedyExecutor
    from hetsched.slim.routers import ROUTERS
    from hetsched.slim.sim.scenario import ScenarioConfig, accuracy_table
    from hetsched.slim.sim.simulated_backend import SimulatedBackend
    from tests.slim.executor.conftest import CheckedBackend

    loop = EventLoop()
    spec = DEVICES["t4"]
    backends = [
        CheckedBackend(SimulatedBackend(spec, costs, loop), spec.memory_bytes) for _ in range(2)
    ]
    cluster = SlimCluster(
        [GreedyExecutor(backend, loop, name=f"s{i}") for i, backend in enumerate(backends)],
        loop,
        lambda segment, prev, source, target: 0.001,
        TableAccuracy(accuracy_table(ScenarioConfig()), np.zeros(8)),
        ClusterConfig(),
    )
    cluster.schedule_arrivals([0.0] * 8)
    loop.step()  # the first arrival
    loop.run(until_s=0.0)  # and the others at t = 0
    requests = list(cluster.fifo)
    for request in requests:
        request.payload = f"image-{request.image_id}"
    cluster.run(ROUTERS.create("random", seed=0))
    assert len(cluster.completed) == 8
    seen = [x for backend in backends for _key, _width, inputs in backend.batches for x in inputs]
    assert sorted(seen) == sorted(f"image-{i}" for i in range(8) for _ in range(4))
    # The simulated backend hands each input back as its output; the cluster keeps it.
    assert [r.payload for r in requests] == [f"image-{r.image_id}" for r in requests]
