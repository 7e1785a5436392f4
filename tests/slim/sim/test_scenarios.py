"""Shipped scenarios: strict YAML, held-out tags, loads from the device model, arrival processes
and runtime changes, and one-line errors for bad scenarios."""

import numpy as np
import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app as app
from hetsched.core.devices import DEVICES
from hetsched.core.errors import ConfigError, HetschedError, UnknownNameError
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.routers import Router, RoutingDecision
from hetsched.slim.sim.capacity import server_capacity_per_s
from hetsched.slim.sim.scenario import (
    ScenarioConfig,
    arrival_rate_per_s,
    build_cluster,
    model_costs,
    with_overrides,
)
from hetsched.slim.sim.scenario_catalog import load_scenario, scenario_names, summarize_scenario
from hetsched.slim.sim.workload import arrival_times_s

runner = CliRunner()


def test_every_shipped_scenario_validates_and_the_catalogue_has_what_issue_19_asks():
    names = scenario_names()
    assert names[0] == "paper"
    scenarios = {name: load_scenario(name) for name in names}
    assert sum(s.held_out for s in scenarios.values()) >= 2
    paper = scenarios["paper"]
    assert paper.model_dump(exclude={"description", "slo_ms"}) == ScenarioConfig().model_dump(
        exclude={"description", "slo_ms"}
    )
    others = [s for name, s in scenarios.items() if name != "paper"]
    assert all(s.slo_ms < float("inf") for s in scenarios.values())
    assert all(len(s.servers) >= 4 for s in others)
    assert {"ethernet-1g", "ethernet-10g", "wifi5"} <= {s.link for s in others}
    assert {1.5, 3.0} <= {s.load_factor for s in others}
    assert any(s.arrival == "bursty" and s.burst_factor >= 4 for s in others)
    assert any(s.arrival == "diurnal" for s in others)
    kinds = {change.kind for s in others for change in s.changes}
    assert kinds == {"slowdown", "outage"}


def test_unknown_scenario_names_the_known_ones(tmp_path):
    with pytest.raises(UnknownNameError, match="known: paper, "):
        load_scenario("nope")
    path = tmp_path / "mine.yaml"
    path.write_text("servers: [cpu]\nnum_imgs: 3\n")
    with pytest.raises(ConfigError, match="num_imgs"):
        load_scenario(str(path))


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"servers": []}, "servers"),
        ({"group_sizes": [0, 4]}, "group_sizes"),
        ({"group_sizes": []}, "group_sizes"),
        ({"num_images": 0}, "num_images"),
        ({"changes": [{"kind": "outage", "server": 5, "start_fraction": 0.1}]}, "changes"),
        (
            {
                "changes": [
                    {"kind": "slowdown", "server": 0, "start_fraction": 0.5, "end_fraction": 0.2}
                ]
            },
            "end_fraction",
        ),
    ],
)
def test_bad_scenarios_fail_naming_the_field(update, field):
    with pytest.raises(ConfigError, match=field):
        with_overrides(ScenarioConfig(), **update)


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("servers: []\n", "servers"),
        ("group_sizes: [0]\n", "group_sizes"),
        ("group_sizes: []\n", "group_sizes"),
    ],
)
def test_cli_fails_with_one_line_for_a_bad_scenario(tmp_path, yaml_text, field):
    """The CLI raises a HetschedError (the entry point prints it as one line, exit 2)."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    result = runner.invoke(
        app, ["slim", "evaluate-router", "random", "--seeds", "0", "--scenario", str(path)]
    )
    assert isinstance(result.exception, HetschedError)
    assert field in str(result.exception) and "\n" not in str(result.exception)
    images = runner.invoke(app, ["slim", "evaluate-router", "random", "--images", "0"])
    assert isinstance(images.exception, HetschedError)
    assert "--images" in str(images.exception)


def test_scenarios_command_lists_each_with_its_capacity():
    result = runner.invoke(app, ["slim", "scenarios"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == scenario_names()
    fastest = server_capacity_per_s(DEVICES["rtx-2080-ti"], model_costs(), ExecutorConfig())
    assert all(f"({fastest:.0f} img/s at width 1.0" in line for line in lines)
    assert sum("held-out" in line for line in lines) >= 2
    for line in lines:  # paper keeps the paper's FINDFREEBESTFIT, the others run exact widths
        assert ("; free best fit;" in line) == (line.split()[0] == "paper"), line
        assert ("; exact width;" in line) != (line.split()[0] == "paper"), line


def test_capacity_follows_the_device_model_and_sets_the_load():
    costs, knobs = model_costs(), ExecutorConfig()
    gpu, old, cpu = (
        server_capacity_per_s(DEVICES[d], costs, knobs)
        for d in ("rtx-2080-ti", "gtx-980-ti", "cpu")
    )
    assert gpu > old > cpu > 0
    slim = server_capacity_per_s(DEVICES["rtx-2080-ti"], costs, knobs, 0.25)
    assert slim > 4 * gpu  # a quarter of the channels costs far less than a quarter
    scenario = load_scenario("lan-3x")
    assert arrival_rate_per_s(scenario) == pytest.approx(3.0 * gpu)
    summary = summarize_scenario("lan-3x", scenario)
    assert summary.load_vs_fastest == pytest.approx(3.0)
    assert summary.cluster_capacity_per_s == pytest.approx(gpu + 2 * old + cpu)
    assert arrival_rate_per_s(with_overrides(scenario, rate_per_s=100.0)) == 100.0


def test_bursty_factor_and_diurnal_ramp_keep_the_mean_rate():
    rng = np.random.default_rng(1)
    bursty = arrival_times_s(rng, 100.0, "bursty", duration_s=400.0, burst_factor=4.0, burst_s=0.5)
    assert len(bursty) / 400.0 == pytest.approx(100.0, rel=0.1)
    counts = np.bincount((bursty / 0.1).astype(int), minlength=4000)
    assert (counts == 0).mean() > 0.6  # silent three quarters of the time
    diurnal = arrival_times_s(
        np.random.default_rng(2), 1000.0, "diurnal", duration_s=20.0, period_s=10.0, amplitude=0.6
    )
    assert len(diurnal) / 20.0 == pytest.approx(1000.0, rel=0.05)
    phase = (diurnal % 10.0) / 10.0
    trough = np.mean((phase < 0.1) | (phase > 0.9))
    peak = np.mean((phase > 0.4) & (phase < 0.6))
    assert peak > 3 * trough  # 1.6 r at the peak against 0.4 r at the trough
    again = arrival_times_s(np.random.default_rng(2), 1000.0, "diurnal", count=500, period_s=10.0)
    assert len(again) == 500 and np.all(np.diff(again) >= 0)


class Recorder(Router):
    """Everything to server 0 at full width; records what the state says of server 0."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, bool]] = []

    def decide(self, state):
        self.seen.append((state.now_s, state.servers[0].available))
        return RoutingDecision(0, 1.0, 4)


SMALL = dict(
    servers=("rtx-2080-ti", "cpu"),
    link="ethernet-10g",
    arrival="poisson",
    rate_per_s=300.0,
    num_images=300,
    decision_time_s=0.0001,
)


def test_a_slowdown_makes_the_server_slower_from_its_start():
    def latencies(changes):
        cluster = build_cluster(ScenarioConfig(**SMALL, changes=changes), seed=0)
        cluster.run(Recorder())
        return np.array(
            [image.latency_s for image in sorted(cluster.completed, key=lambda i: i.image_id)]
        )

    normal = latencies([])
    slowed = latencies([{"kind": "slowdown", "server": 0, "start_fraction": 0.5, "factor": 3.0}])
    assert np.allclose(normal[:100], slowed[:100])
    assert slowed[200:].mean() > 1.5 * normal[200:].mean()


def test_an_outage_idles_the_server_and_tells_the_router():
    changes = [{"kind": "outage", "server": 0, "start_fraction": 0.4, "end_fraction": 0.6}]
    cluster = build_cluster(ScenarioConfig(**SMALL, changes=changes), seed=0)
    router = Recorder()
    cluster.run(router)
    times = np.array([t for t, _ in router.seen])
    down = np.array([not up for _, up in router.seen])
    assert down.any() and not down[:10].any() and not down[-10:].any()
    start_s, end_s = times[down].min(), times[down].max()
    # nothing finished on the failed server while it was down (beyond batches already running)
    finished = np.array(sorted(c.finished_s for c in cluster.completed))
    inside = finished[(finished > start_s + 0.01) & (finished < end_s)]
    assert len(inside) == 0
    assert len(cluster.completed) == 300


def test_a_scenario_simulates_the_model_it_names():
    """The live scenarios serve 8x8 digits (10 classes): simulated with CIFAR-100's costs their
    servers were 16x slower than with their own (34.8 against 550 images/s at width 1.0)."""
    cifar = load_scenario("lan-3x")
    digits = with_overrides(cifar, image_size=8, num_classes=10)
    assert summarize_scenario("d", digits).fastest_capacity_per_s > 10 * (
        summarize_scenario("c", cifar).fastest_capacity_per_s
    )
    assert model_costs(10, 8).num_classes == 10
    live = load_scenario("benchmarks/slim-live/live-2x.yaml")
    assert (live.image_size, live.num_classes) == (8, 10)
    with pytest.raises(HetschedError, match="image_size"):
        with_overrides(cifar, image_size=4)
