"""Futures a router could expect: a lookahead's copy of the cluster gets arrivals drawn from the
scenario's process, given only the present, and fresh difficulties for the images to come."""

import numpy as np
import pytest

from hetsched.slim.router_training.teachers import fork
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.future_arrivals import FutureSampler
from hetsched.slim.sim.scenario import arrival_rate_per_s, build_cluster, with_overrides
from hetsched.slim.sim.scenario_catalog import load_scenario
from hetsched.slim.sim.workload import arrival_times_s


def _part_way(scenario, seed: int = 3, decisions: int = 150):
    cluster = build_cluster(scenario, seed)
    router = ROUTERS.create("jsq-0.5")
    for _ in range(decisions):
        state = cluster.next_state()
        assert state is not None
        cluster.route(router.decide(state))
    return cluster


def test_a_copy_gets_a_drawn_future_and_the_original_keeps_its_own():
    scenario = with_overrides(load_scenario("bursty-3x"), num_images=600)
    cluster = _part_way(scenario)
    own = cluster.arrival_times_s
    copied = fork(cluster)
    arrived, left = copied.arrived, copied.images_to_arrive
    assert left > 0 and arrived + left == len(own)
    FutureSampler(scenario).resample(copied, np.random.default_rng(0))
    drawn = copied.arrival_times_s
    assert drawn[:arrived] == own[:arrived] and drawn[arrived:] != own[arrived:]
    assert len(drawn) == len(own) and drawn == sorted(drawn)
    assert drawn[arrived] >= copied.clock.now_s()
    assert cluster.arrival_times_s == own  # the original's future is untouched
    # the copy runs to the end on its new future: every image arrives and completes once
    copied.run(ROUTERS.create("jsq-0.5"))
    assert copied.done and len(copied.completed) == len(own)
    assert sorted(i.arrival_s for i in copied.completed) == drawn


def test_difficulties_of_the_images_to_come_are_redrawn_and_past_ones_kept():
    scenario = with_overrides(load_scenario("lan-1.5x"), num_images=400)
    cluster = _part_way(scenario, decisions=100)
    copied = fork(cluster)
    before = list(copied.accuracy._difficulty)
    FutureSampler(scenario).resample(copied, np.random.default_rng(1))
    after = copied.accuracy._difficulty
    first = copied.arrived
    assert after[:first] == before[:first] and after[first:] != before[first:]
    assert cluster.accuracy._difficulty == before


def test_the_bursty_phase_is_read_from_the_last_arrival():
    scenario = load_scenario("bursty-3x")
    sampler = FutureSampler(scenario)
    on_gap_s = 1.0 / (scenario.burst_factor * arrival_rate_per_s(scenario))
    assert sampler.bursting(1.0, 1.0 - on_gap_s)
    assert not sampler.bursting(1.0, 1.0 - 50 * on_gap_s)
    assert sampler.bursting(0.0, None)  # the process starts ON
    # OFF: the first drawn arrival waits for the rest of the OFF period (mean 3 x 20 ms here)
    rng = np.random.default_rng(2)
    off = [sampler.draw(1.0, 0.5, 5, rng)[0] - 1.0 for _ in range(300)]
    on = [sampler.draw(1.0, 1.0, 5, rng)[0] - 1.0 for _ in range(300)]
    assert np.mean(off) > 20 * np.mean(on) and min(off) > 0 and min(on) > 0


def test_drawn_futures_keep_the_process_rate_and_start_now():
    for name in ("lan-1.5x", "bursty-3x", "diurnal-1g"):
        scenario = load_scenario(name)
        rate = arrival_rate_per_s(scenario)
        drawn = FutureSampler(scenario).draw(7.0, 7.0, 20_000, np.random.default_rng(4))
        assert len(drawn) == 20_000 and drawn[0] >= 7.0 and np.all(np.diff(drawn) >= 0)
        measured = len(drawn) / (drawn[-1] - 7.0)
        assert measured == pytest.approx(rate, rel=0.25), name


def test_a_late_start_continues_the_diurnal_cycle_and_shifts_the_others():
    rng = np.random.default_rng
    shifted = arrival_times_s(rng(5), 100.0, "bursty", count=50, burst_s=0.1, start_s=3.0)
    assert np.array_equal(shifted, 3.0 + arrival_times_s(rng(5), 100.0, "bursty", count=50,
                                                         burst_s=0.1))  # fmt: skip
    # a ramp started at its peak (half a period in) is denser at first than one at its trough
    trough = arrival_times_s(rng(6), 100.0, "diurnal", count=400, period_s=60.0, amplitude=0.9)
    peak = arrival_times_s(rng(6), 100.0, "diurnal", count=400, period_s=60.0, amplitude=0.9,
                           start_s=30.0)  # fmt: skip
    assert peak[0] >= 30.0 and (peak[-1] - 30.0) < 0.5 * trough[-1]


def test_replacing_the_future_is_checked():
    scenario = with_overrides(load_scenario("bursty-3x"), num_images=300)
    cluster = _part_way(scenario, decisions=50)
    left, now = cluster.images_to_arrive, cluster.clock.now_s()
    with pytest.raises(ValueError, match=f"expected {left} future"):
        cluster.replace_future_arrivals([now + 1.0])
    with pytest.raises(ValueError, match="in order"):
        cluster.replace_future_arrivals([now + 1.0 + (left - i) for i in range(left)])
    with pytest.raises(ValueError, match="before now"):
        cluster.replace_future_arrivals([now - 1.0 + i for i in range(left)])
