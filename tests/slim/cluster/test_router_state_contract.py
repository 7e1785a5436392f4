"""The router's state carries the head request's deadline, slack and place, and per-server
backlogs and predicted completion times from the device cost model."""

import math

import pytest

from hetsched.core.devices import DEVICES
from hetsched.slim.routers import ROUTERS, RoutingDecision
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster, model_costs
from hetsched.slim.sim.simulated_backend import batch_alone_s

SCENARIO = ScenarioConfig(
    servers=("rtx-2080-ti", "cpu"), link="ethernet-1g", num_images=40, slo_ms=100.0
)


def test_head_deadline_slack_and_location():
    cluster = build_cluster(SCENARIO, seed=0)
    state = cluster.next_state()
    head = cluster.fifo[0]
    assert state.head_deadline_s == pytest.approx(head.arrival_s + 0.1)
    assert state.head_slack_s == pytest.approx(state.head_deadline_s - state.now_s)
    assert state.head_location is None and state.head_prev_width is None
    cluster.route(RoutingDecision(1, 0.5, 1))
    while True:  # follow that image until it is the head again, after its first segment
        state = cluster.next_state()
        if cluster.fifo[0] is head:
            break
        cluster.route(RoutingDecision(0, 1.0, 1))
    assert state.head_location == 1 and state.head_prev_width == 0.5
    assert state.head_segment == 1


def test_predictions_follow_the_device_model_and_backlog():
    cluster = build_cluster(SCENARIO.model_copy(update={"num_images": 1}), seed=0)
    state = cluster.next_state()
    costs = model_costs()
    gpu, cpu = state.servers
    assert gpu.backlog_s == 0.0 and len(gpu.image_done_s) == len(state.widths)
    # Idle servers: an image from the router's host costs the transfer plus four lone segments.
    for server, spec in ((gpu, DEVICES["rtx-2080-ti"]), (cpu, DEVICES["cpu"])):
        alone = batch_alone_s(spec, costs, 0, 1.0, 1.0, 1) + sum(
            batch_alone_s(spec, costs, k, 1.0, 1.0, 1) for k in (1, 2, 3)
        )
        assert server.transfer_s > 0
        assert server.image_done_s[-1] == pytest.approx(server.transfer_s + alone)
        first = batch_alone_s(spec, costs, 0, 0.25, 1.0, 1)
        assert server.segment_done_s[0] == pytest.approx(server.transfer_s + first)
    assert gpu.image_done_s[-1] < cpu.image_done_s[-1]  # the GPU is faster
    assert list(gpu.image_done_s) == sorted(gpu.image_done_s)  # slimmer is faster


def test_backlog_grows_with_dispatched_work_and_drains_to_zero():
    cluster = build_cluster(SCENARIO, seed=0)
    backlogs = []
    while (state := cluster.next_state()) is not None:
        backlogs.append(state.servers[1].backlog_s)
        cluster.route(RoutingDecision(1, 1.0, 4))
    assert max(backlogs) > 0
    assert cluster.completion.backlog_s == [0.0, pytest.approx(0.0, abs=1e-12)]


def test_no_slo_means_infinite_slack_and_routers_still_run():
    cluster = build_cluster(ScenarioConfig(num_images=10), seed=0)
    state = cluster.next_state()
    assert math.isinf(state.head_slack_s) and math.isinf(state.head_deadline_s)
    cluster.run(ROUTERS.create("random", seed=0))
    assert len(cluster.completed) == 10
