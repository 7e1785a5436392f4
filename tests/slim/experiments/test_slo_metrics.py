"""SLO accounting on a hand-computed case, energy integration, steady-state window and
stability flag, executed against requested widths."""

import numpy as np
import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
from hetsched.slim.cluster.config import ClusterConfig
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.executor.server import ServerTelemetry
from hetsched.slim.experiments.scenario_experiment import evaluate_window
from hetsched.slim.experiments.slo_metrics import EnergyProbe, window_metrics
from hetsched.slim.model.accuracy import load_accuracy_table
from hetsched.slim.routers import Router, RoutingDecision
from hetsched.slim.sim.network import LINK_PRESETS, Link
from hetsched.slim.sim.scenario import (
    ScenarioConfig,
    model_costs,
    with_exact_width,
    with_overrides,
)
from hetsched.slim.sim.scenario_catalog import load_scenario
from hetsched.slim.sim.simulated_backend import SimulatedBackend
from hetsched.slim.sim.workload import window_bounds

SEGMENT_S = 0.010
POWER_W = 50.0


class SerialServer:
    """One request at a time, SEGMENT_S each, constant power: every time is hand-computable."""

    name = "serial"

    def __init__(self, loop: EventLoop) -> None:
        self.loop, self.waiting, self.busy = loop, [], False

    def submit_many(self, segment, width, prev_width, payloads, finished):
        self.waiting += [(payload, finished) for payload in payloads]
        self._start()

    def _start(self):
        if self.busy or not self.waiting:
            return
        payload, finished = self.waiting.pop(0)
        self.busy = True

        def end():
            self.busy = False
            finished(1.0, [payload])
            self._start()

        self.loop.schedule_in(SEGMENT_S, end)

    def telemetry(self):
        return ServerTelemetry(len(self.waiting), POWER_W, 100.0, 100.0 * self.busy)

    def energy(self):
        return POWER_W * self.loop.now_s(), "constant"


class Always(Router):
    def __init__(self, server=0, width=1.0, group=1):
        self.decision = RoutingDecision(server, width, group)

    def decide(self, state):
        return self.decision


def test_slo_attainment_goodput_and_energy_on_a_hand_computed_run():
    loop = EventLoop()
    oracle = TableAccuracy(load_accuracy_table("paper"), np.zeros(3))
    config = ClusterConfig(widths=(1.0,), group_sizes=(1,), decision_time_s=0.0, slo_s=0.075)
    cluster = SlimCluster([SerialServer(loop)], loop, lambda *_: 0.0, oracle, config)
    cluster.schedule_arrivals([0.0, 0.0, 0.1])
    start_s, end_s = window_bounds(cluster.arrival_times_s, warmup_fraction=0.0)
    assert (start_s, end_s) == (0.0, 0.1)
    probe = EnergyProbe(cluster, start_s, end_s)
    cluster.run(Always())
    # Images 0 and 1 alternate on the one server: segments of image 0 end at 10, 30, 50, 70 ms,
    # of image 1 at 20, 40, 60, 80 ms; image 2 arrives at 100 ms to an idle server (140 ms).
    latencies = {image.image_id: image.latency_s for image in cluster.completed}
    assert latencies == pytest.approx({0: 0.070, 1: 0.080, 2: 0.040})
    metrics = window_metrics(cluster, probe, start_s, end_s)
    assert metrics.images == 3
    assert metrics.slo_attainment == pytest.approx(2 / 3)  # image 1 misses 75 ms
    assert metrics.goodput_per_s == pytest.approx(2 / 0.1)
    assert metrics.latency_p50_s == pytest.approx(0.070)
    assert metrics.latency_mean_s == pytest.approx((0.070 + 0.080 + 0.040) / 3)
    # 0.1 s of constant power, two images completed inside the window
    assert metrics.energy_per_image_j == pytest.approx(POWER_W * 0.1 / 2)
    assert metrics.requested_widths == metrics.executed_widths == {"1": 1.0}


def sim_cluster(devices, arrivals_s, executor=None):
    loop = EventLoop()
    costs = model_costs()
    backends = [SimulatedBackend(DEVICES[d], costs, loop) for d in devices]
    servers = [GreedyExecutor(b, loop, executor or ExecutorConfig()) for b in backends]
    link = Link(loop, LINK_PRESETS["ethernet-10g"], costs)
    oracle = TableAccuracy(load_accuracy_table("paper"), np.zeros(len(arrivals_s)))
    cluster = SlimCluster(servers, loop, link.transfer_time, oracle, ClusterConfig())
    cluster.schedule_arrivals(arrivals_s)
    return cluster


def test_energy_of_an_idle_window_is_idle_power_times_time():
    devices = ("rtx-2080-ti", "cpu")
    cluster = sim_cluster(devices, [0.0, 10.0])
    probe = EnergyProbe(cluster, 3.0, 9.0)  # after t_idle has unloaded the first image's work
    cluster.run(Always(group=1))
    idle_w = sum(DEVICES[d].idle_power_w for d in devices)
    assert probe.window_energy_j == pytest.approx(idle_w * 6.0, rel=1e-12)


FAST = with_overrides(load_scenario("lan-1.5x"), num_images=1500)


def test_an_overloaded_policy_is_flagged_unstable_and_a_stable_one_is_not():
    overloaded = evaluate_window(FAST, Always(server=3, width=1.0, group=16), seed=0)  # the CPU
    assert overloaded.unstable and overloaded.slo_attainment < 0.2
    stable = evaluate_window(FAST, Always(server=0, width=0.25, group=16), seed=0)
    assert not stable.unstable and stable.slo_attainment > 0.99


def test_doubling_the_run_leaves_steady_state_metrics_in_place():
    router = Always(server=0, width=0.5, group=16)
    short = evaluate_window(FAST, router, seed=1)
    long = evaluate_window(with_overrides(FAST, num_images=3000), router, seed=1)
    assert not short.unstable and not long.unstable
    assert long.accuracy_pct == pytest.approx(short.accuracy_pct, abs=4.0)  # binomial noise
    assert long.slo_attainment == pytest.approx(short.slo_attainment, abs=0.01)
    assert long.latency_p50_s == pytest.approx(short.latency_p50_s, rel=0.1)
    assert long.energy_per_image_j == pytest.approx(short.energy_per_image_j, rel=0.1)


class Cycling(Router):
    def __init__(self):
        self.count = 0

    def decide(self, state):
        self.count += 1
        width = state.widths[(self.count // len(state.servers)) % len(state.widths)]
        return RoutingDecision(self.count % len(state.servers), width, 4)


def test_executed_widths_beside_requested_ones_and_exact_width_execution():
    exact = with_overrides(load_scenario("lan-3x"), num_images=1200)
    assert exact.executor.exact_width  # the shipped non-paper scenarios run exact widths
    best_fit = evaluate_window(with_exact_width(exact, False), Cycling(), seed=0)
    assert best_fit.requested_widths == pytest.approx(
        {"0.25": 0.25, "0.5": 0.25, "0.75": 0.25, "1": 0.25}, abs=0.03
    )
    assert best_fit.executed_widths["1"] > best_fit.requested_widths["1"]  # ran wider
    exact_run = evaluate_window(exact, Cycling(), seed=0)
    assert exact_run.executed_widths == pytest.approx(exact_run.requested_widths)


def test_the_fast_path_is_deterministic_per_seed():
    scenario = ScenarioConfig(**{**FAST.model_dump(), "num_images": 500})
    first = evaluate_window(scenario, Cycling(), seed=4)
    again = evaluate_window(scenario, Cycling(), seed=4)
    other = evaluate_window(scenario, Cycling(), seed=5)
    assert first == again and first != other


def test_an_arrival_admitted_late_keeps_its_scheduled_time_and_deadline():
    """A busy live loop fires arrival events late: the lag counts against the image (its latency
    and deadline run from when it was due), and window counts cannot exceed the arrivals."""
    loop = EventLoop()
    oracle = TableAccuracy(load_accuracy_table("paper"), np.zeros(2))
    config = ClusterConfig(widths=(1.0,), group_sizes=(1,), decision_time_s=0.0, slo_s=0.075)
    cluster = SlimCluster([SerialServer(loop)], loop, lambda *_: 0.0, oracle, config)
    loop.schedule(0.05, lambda: cluster.schedule_arrivals([0.0, 0.01]))  # admitted 50/40 ms late
    cluster.run(Always())
    arrivals = {image.image_id: image.arrival_s for image in cluster.completed}
    assert arrivals == pytest.approx({0: 0.0, 1: 0.01})
    latencies = {image.image_id: image.latency_s for image in cluster.completed}
    # served from 50 ms on, alternating: image 0 ends at 120 ms, image 1 at 130 ms
    assert latencies == pytest.approx({0: 0.120, 1: 0.120})
    assert not any(image.met_slo for image in cluster.completed)
    probe = EnergyProbe(cluster, 0.0, 0.01)
    metrics = window_metrics(cluster, probe, 0.0, 0.01)
    assert metrics.images == 2 and metrics.slo_attainment == 0.0
