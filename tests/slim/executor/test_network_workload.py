"""The link model and the seeded workload generator."""

import numpy as np
import pytest

from hetsched.core.errors import UnknownNameError
from hetsched.core.events import EventLoop
from hetsched.slim.sim.network import LINK_PRESETS, Link, LinkConfig, link_config
from hetsched.slim.sim.workload import arrival_times_s, drive, segment_workload
from tests.slim.executor.conftest import WIDTHS


def test_shared_medium_serialises_and_switched_links_do_not(costs):
    loop = EventLoop()
    shared = Link(loop, LinkConfig(bandwidth_bytes_per_s=1e6, latency_s=0.01), costs)
    size = shared.input_bytes(1, 1.0)
    assert size == 64 * 32 * 32 * 4  # segment 1's output at full width, float32
    assert shared.input_bytes(1, 0.25) == size // 4
    assert shared.input_bytes(0, None) == 3 * 32 * 32 * 4  # the image
    assert shared.transfer_time(1, 1.0, 0, 1) == pytest.approx(size / 1e6 + 0.01)
    assert shared.transfer_time(1, 1.0, None, 2) == pytest.approx(2 * size / 1e6 + 0.01)
    assert shared.transfer_time(1, 1.0, 2, 2) == 0.0  # same host
    switched = Link(
        loop, LinkConfig(bandwidth_bytes_per_s=1e6, latency_s=0.01, shared_medium=False), costs
    )
    assert switched.transfer_time(1, 1.0, 0, 1) == switched.transfer_time(1, 1.0, 0, 2)
    speeds = [LINK_PRESETS[name].bandwidth_bytes_per_s for name in ("wifi5", "ethernet-1g")]
    assert speeds[0] < speeds[1] < LINK_PRESETS["ethernet-10g"].bandwidth_bytes_per_s
    with pytest.raises(UnknownNameError, match=r"unknown preset 'wifi7'.*wifi5"):
        link_config("wifi7")


@pytest.mark.parametrize("pattern", ["poisson", "bursty"])
def test_arrivals_have_the_mean_rate_and_repeat_per_seed(pattern):
    times = arrival_times_s(np.random.default_rng(0), 200.0, pattern, duration_s=100.0)
    assert np.all(np.diff(times) >= 0) and times[-1] < 100.0
    assert len(times) / 100.0 == pytest.approx(200.0, rel=0.15)
    again = arrival_times_s(np.random.default_rng(0), 200.0, pattern, duration_s=100.0)
    assert np.array_equal(times, again)
    counted = arrival_times_s(np.random.default_rng(0), 200.0, pattern, count=500)
    assert len(counted) == 500
    with pytest.raises(ValueError, match="exactly one"):
        arrival_times_s(np.random.default_rng(0), 1.0, pattern)


def test_bursty_arrivals_are_burstier_than_poisson():
    def dispersion(pattern):  # variance / mean of arrivals per 0.1 s window
        times = arrival_times_s(np.random.default_rng(1), 500.0, pattern, duration_s=60.0)
        counts = np.bincount((times / 0.1).astype(int))
        return counts.var() / counts.mean()

    assert dispersion("poisson") == pytest.approx(1.0, abs=0.3)
    assert dispersion("bursty") > 5.0


def test_segment_workload_and_its_replay():
    workload = segment_workload(2, 1000.0, "poisson", 1.0, WIDTHS)
    assert set(workload.segment.tolist()) == {0, 1, 2, 3}
    assert set(workload.width.tolist()) == set(WIDTHS)
    assert np.all(workload.prev_width[workload.segment == 0] == 1.0)
    loop = EventLoop()
    submitted = []

    class Recorder:
        def submit(self, segment, width, prev_width, done):
            submitted.append((loop.now_s(), segment, width, prev_width))

    drive(workload, Recorder(), loop, lambda width: None)
    assert loop.pending == 1  # one arrival pending at a time
    loop.run()
    assert [s[0] for s in submitted] == pytest.approx(workload.arrival_s.tolist())
    assert [s[1] for s in submitted] == workload.segment.tolist()
