"""The simulated device: contention model shape (Figs 1-3), VRAM and energy accounting."""

import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.executor.backend import SegmentKey
from hetsched.slim.sim.simulated_backend import SimulatedBackend


def batch_latency_s(costs, load_batches, size, device="rtx-2080-ti"):
    """Latency of one probe batch of ``size`` started after ``load_batches`` co-running ones."""
    loop = EventLoop()
    backend = SimulatedBackend(DEVICES[device], costs, loop)
    key = SegmentKey(1, 1.0, 1.0)
    handles = [backend.load(1, 1.0) for _ in range(load_batches + 1)]
    loop.run(until_s=0.01)  # every instance's weights have arrived
    *others, probe = handles
    for handle in others:
        backend.run_batch(handle, key, [None] * 16, lambda outputs: None)
    ended = []
    start_s = loop.now_s()
    backend.run_batch(probe, key, [None] * size, lambda outputs: ended.append(loop.now_s()))
    utilization = backend.utilization_pct()
    power_w = backend.power_w()
    loop.run()
    return ended[0] - start_s, utilization, power_w


def test_bigger_batches_and_wider_segments_use_more_of_the_device(costs):
    loop = EventLoop()
    backend = SimulatedBackend(DEVICES["rtx-2080-ti"], costs, loop)
    shares = []
    for width, size in ((0.25, 1), (0.25, 16), (1.0, 1), (1.0, 16)):
        before = backend.utilization_pct()
        backend.run_batch(backend.load(2, width), SegmentKey(2, width, 1.0), [None] * size, print)
        shares.append(backend.utilization_pct() - before)
    assert shares[0] < shares[1] and shares[2] < shares[3] and shares[0] < shares[2]


def test_latency_and_power_rise_with_load_gently_then_sharply(costs):
    alone_s, _, _ = batch_latency_s(costs, 0, 16)
    points = [batch_latency_s(costs, n, 16) for n in range(0, 8)]
    latencies = [p[0] for p in points]
    utilizations = [p[1] for p in points]
    powers = [p[2] for p in points]
    assert latencies == sorted(latencies) and powers == sorted(powers)
    assert utilizations == sorted(utilizations) and utilizations[-1] == 100.0
    # Below the knee the slowdown is mild (< 1.3x); past full load it is several times.
    below = [lat for lat, u, _ in points if u <= 92.0]
    assert max(below) < 1.3 * alone_s
    assert latencies[-1] > 3 * alone_s
    # Latency per point of utilisation is far steeper at the knee than below it.
    gentle = (latencies[1] - latencies[0]) / (utilizations[1] - utilizations[0])
    sharp = (latencies[2] - latencies[1]) / (utilizations[2] - utilizations[1])
    assert sharp > 10 * gentle
    assert batch_latency_s(costs, 0, 32)[0] > alone_s  # bigger batches take longer


def test_vram_energy_and_busy_checks(costs):
    loop = EventLoop()
    spec = DEVICES["gtx-980-ti"]
    backend = SimulatedBackend(spec, costs, loop)
    assert backend.vram_used_bytes() == 0 and backend.power_w() == spec.idle_power_w
    handle = backend.load(0, 0.5)
    assert backend.vram_used_bytes() == costs.instance_param_bytes(0, 0.5)
    backend.run_batch(handle, SegmentKey(0, 0.5, 1.0), [None] * 4, lambda outputs: None)
    assert backend.vram_used_bytes() > costs.instance_param_bytes(0, 0.5)  # + activations
    with pytest.raises(RuntimeError, match="busy"):
        backend.run_batch(handle, SegmentKey(0, 0.5, 1.0), [None], lambda outputs: None)
    with pytest.raises(RuntimeError, match="running"):
        backend.unload(handle)
    with pytest.raises(RuntimeError, match="cannot run"):
        backend.run_batch(backend.load(0, 0.25), SegmentKey(0, 0.5, 1.0), [None], print)
    busy_power_w = backend.power_w()
    loop.run()
    end_s = loop.now_s()
    loop.run(until_s=end_s + 1.0)
    # Energy: the busy stretch at its power, then one idle second.
    assert backend.energy_j() == pytest.approx(
        busy_power_w * end_s + spec.idle_power_w * 1.0, rel=1e-9
    )
    backend.unload(handle)
    assert backend.vram_used_bytes() == costs.instance_param_bytes(0, 0.25)
