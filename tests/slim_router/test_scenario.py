import numpy as np
import pytest

from hetsched.core.errors import ConfigError, HetschedError
from hetsched.core.events import EventLoop
from hetsched.slim.routers import ROUTERS
from hetsched.slim.scenario import ScenarioConfig, arrival_times_s, build_cluster, mean_top1
from hetsched.slim.standin import (
    DEVICE_MODELS,
    PaperAccuracyTable,
    QueueingServer,
    SharedLink,
    segment_gflop,
)


def test_paper_table_nearest_neighbour_lookup():
    table = PaperAccuracyTable()
    assert table.lookup((1.0, 1.0, 1.0, 1.0)) == pytest.approx(0.7643)
    assert table.lookup((0.5, 0.25, 1.0, 0.75)) == pytest.approx(0.7453)
    assert table.lookup((1.0, 1.0, 1.0, 0.75)) == pytest.approx(0.7643)  # nearest: all-1.0
    assert table.lookup((0.25,)) == pytest.approx((0.7030 + 0.7533) / 2)  # two prefixes tie
    assert 0.70 < mean_top1(ScenarioConfig()) < 0.77


def test_queueing_server_batches_by_key_and_reports_power():
    loop = EventLoop()
    server = QueueingServer(loop, "s", DEVICE_MODELS["rtx-2080-ti"], max_batch=4, slots=1)
    finished = []
    for _ in range(6):
        server.submit(1, 0.5, 0.25, finished.append)
    server.submit(1, 1.0, 0.25, finished.append)
    assert server.telemetry().queue_length == 6  # the first request started alone at once
    assert server.telemetry().utilization_pct == 100.0
    assert server.telemetry().power_w == DEVICE_MODELS["rtx-2080-ti"].max_power_w
    loop.run()
    assert finished == [0.5] * 6 + [1.0]
    assert server.telemetry().power_w == DEVICE_MODELS["rtx-2080-ti"].idle_power_w
    assert segment_gflop(1, 1.0, 1.0) > segment_gflop(1, 1.0, 0.25) > segment_gflop(1, 0.25, 0.25)


def test_shared_link_serialises_transfers():
    loop = EventLoop()
    link = SharedLink(loop, bandwidth_bytes_per_s=1e6, latency_s=0.01)
    first = link.transfer_time(1, 1.0, 0, 1)  # 262144 bytes
    second = link.transfer_time(1, 1.0, 0, 2)
    assert first == pytest.approx(0.262144 + 0.01)
    assert second == pytest.approx(2 * 0.262144 + 0.01)


def test_arrivals_are_seeded_with_the_configured_mean_rate():
    scenario = ScenarioConfig(num_images=20000, rate_per_s=100.0)
    for kind in ("bursty", "poisson"):
        config = scenario.model_copy(update={"arrival": kind})
        times = arrival_times_s(config, np.random.default_rng(0))
        assert len(times) == 20000 and np.all(np.diff(times) >= 0)
        assert 20000 / times[-1] == pytest.approx(100.0, rel=0.1)
        assert np.array_equal(times, arrival_times_s(config, np.random.default_rng(0)))


def test_same_seed_same_run_and_bad_scenarios_rejected():
    scenario = ScenarioConfig(num_images=30)
    runs = []
    for _ in range(2):
        cluster = build_cluster(scenario, seed=4)
        cluster.run(ROUTERS.create("random", seed=4))
        runs.append([(i.image_id, i.latency_s, i.correct) for i in cluster.completed])
    assert runs[0] == runs[1]
    with pytest.raises(ConfigError, match="unknown device"):
        build_cluster(scenario.model_copy(update={"servers": ("tpu",)}), 0)
    with pytest.raises(ConfigError, match="only 'paper'"):
        build_cluster(scenario.model_copy(update={"accuracy_table": "x.json"}), 0)
    with pytest.raises(HetschedError, match="live backend"):
        build_cluster(scenario, 0, live=True)
