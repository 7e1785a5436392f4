import json

import numpy as np
import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.errors import ConfigError, DataError
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.scenario import (
    ScenarioConfig,
    accuracy_table,
    arrival_times_s,
    build_cluster,
    mean_top1,
)


def test_paper_table_nearest_neighbour_lookup():
    table = accuracy_table(ScenarioConfig())
    assert table.lookup((1.0, 1.0, 1.0, 1.0)) == pytest.approx(0.7643)
    assert table.lookup((0.5, 0.25, 1.0, 0.75)) == pytest.approx(0.7453)
    assert table.lookup((1.0, 1.0, 1.0, 0.75)) == pytest.approx(0.7643)  # nearest: all-1.0
    assert table.lookup((0.25,)) == pytest.approx((0.7030 + 0.7533) / 2)  # two prefixes tie
    assert 0.70 < mean_top1(ScenarioConfig()) < 0.77


def test_servers_are_greedy_executors_on_the_named_devices(tmp_path):
    cluster = build_cluster(ScenarioConfig(num_images=5), seed=0)
    assert all(isinstance(server, GreedyExecutor) for server in cluster.servers)
    assert [s.backend.spec.name for s in cluster.servers] == [
        "rtx-2080-ti",
        "rtx-2080-ti",
        "gtx-980-ti",
    ]
    profile = DEVICES["t4"].model_copy(update={"name": "my-t4", "source": "profile"})
    path = tmp_path / "my-t4.json"
    path.write_text(json.dumps({"device": profile.model_dump()}))
    scenario = ScenarioConfig(
        num_images=5, servers=("cpu", str(path)), executor={"max_batch": 4}, link="ethernet-1g"
    )
    cluster = build_cluster(scenario, seed=0)
    assert [s.backend.spec.name for s in cluster.servers] == ["cpu", "my-t4"]
    assert cluster.servers[1].config.max_batch == 4
    cluster.run(ROUTERS.create("random", seed=0))
    assert len(cluster.completed) == 5
    with pytest.raises(ConfigError, match=r"not in executor\.widths"):
        build_cluster(scenario.model_copy(update={"widths": (0.3,)}), 0)


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
    with pytest.raises(ConfigError, match=r"servers\[0\]: unknown device 'tpu'"):
        build_cluster(scenario.model_copy(update={"servers": ("tpu",)}), 0)
    with pytest.raises(DataError, match="accuracy table not found"):
        build_cluster(scenario.model_copy(update={"accuracy_table": "x.json"}), 0)


def test_a_measured_table_answers_workload_images_beyond_the_test_split_in_turn():
    from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
    from hetsched.slim.model.accuracy import AccuracyTable

    full = (1.0, 1.0, 1.0, 1.0)
    table = AccuracyTable({full: 2 / 3}, {full: np.array([True, False, True])})
    oracle = TableAccuracy(table, difficulty=np.zeros(10))  # difficulty 0: would say "correct"
    assert [oracle.correct(full, i) for i in range(7)] == [True, False, True] * 2 + [True]
