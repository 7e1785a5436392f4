"""TorchBackend on the CPU: load/unload, batches equal the plain segment forward, bad input."""

from __future__ import annotations

import time

import pytest
import torch

from hetsched.core.energy import RaplEnergyMeter, RaplUnavailableError
from hetsched.core.errors import ConfigError, DataError
from hetsched.core.realtime import RealTimeLoop
from hetsched.core.utilization import MIN_INTERVAL_S
from hetsched.slim.executor.backend import SegmentKey
from hetsched.slim.live import busy
from hetsched.slim.live.busy import BusyShare
from hetsched.slim.live.devices import resolve_live_device
from hetsched.slim.live.torch_backend import TorchBackend
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, WIDTHS, SlimResNet


@pytest.fixture
def backend(digits_model: SlimResNet):
    loop = RealTimeLoop()
    backend = TorchBackend(digits_model, loop, "cpu", max_workers=4)
    yield backend
    backend.close()


def _run(backend: TorchBackend, handle, key: SegmentKey, inputs) -> list[torch.Tensor]:
    got: list[list[torch.Tensor]] = []
    backend.run_batch(handle, key, inputs, got.append)
    assert backend._loop.run_until(lambda: bool(got), timeout_s=30.0)
    return got[0]


def test_load_accounts_real_bytes_and_unload_frees_them(backend: TorchBackend) -> None:
    costs = compute_cost_table(10)
    assert backend.vram_used_bytes() == 0
    handles = [backend.load(k, w) for k in range(NUM_SEGMENTS) for w in WIDTHS]
    for handle in handles:  # the cost table's estimate is exactly the tensors' bytes
        assert handle.param_bytes == costs.instance_param_bytes(handle.segment, handle.width)
        assert backend.instance_bytes(handle.segment, handle.width) == handle.param_bytes
    assert backend.vram_used_bytes() == sum(h.param_bytes for h in handles)
    for handle in handles:
        backend.unload(handle)
        assert next(handle.module.parameters()).device.type == "cpu"
    assert backend.vram_used_bytes() == 0 and backend.loaded == ()
    with pytest.raises(RuntimeError, match="not loaded"):
        backend.unload(handles[0])


def test_telemetry_names_its_sources(backend: TorchBackend) -> None:
    try:
        RaplEnergyMeter()
        rapl = True
    except RaplUnavailableError:
        rapl = False
    if rapl:
        assert backend.energy_source == "rapl"
    else:  # this machine and CI: no counter, so the estimate says so
        assert backend.energy_source == "power-model"
        assert "ESTIMATED" in backend.meter.explanation
    assert backend.max_power_w == backend.spec.max_power_w
    assert backend.memory_bytes > 0
    assert backend.power_w() >= backend.spec.idle_power_w * 0.99
    assert backend.energy_j() >= 0
    time.sleep(MIN_INTERVAL_S)  # the CPU reader's first reading needs an interval
    assert 0 <= backend.utilization_pct() <= 100


def test_segment_chain_equals_the_whole_model_at_the_executed_widths(
    backend: TorchBackend, digits_model: SlimResNet, digits_images: torch.Tensor
) -> None:
    widths = (0.5, 0.25, 1.0, 0.75)
    images = digits_images[:5]
    activations = list(images)
    prev = 1.0
    for k, width in enumerate(widths):
        handle = backend.load(k, width)
        activations = _run(backend, handle, SegmentKey(k, width, prev), activations)
        assert len(activations) == len(images) and handle.batches == 1 and not handle.busy
        prev = width
    with torch.inference_mode():
        expected = digits_model(images, widths)
    torch.testing.assert_close(torch.stack(activations), expected, rtol=1e-4, atol=1e-5)
    assert len(backend.batch_latencies_s) == NUM_SEGMENTS


@pytest.mark.parametrize("segment", range(NUM_SEGMENTS))
def test_a_wider_instance_runs_at_its_own_width(
    backend: TorchBackend, digits_model: SlimResNet, digits_images: torch.Tensor, segment: int
) -> None:
    # The executor reports the instance's width as the executed one (FINDFREEBESTFIT gives the
    # smallest width >= w_req), so the output must be that width's, whatever was requested.
    with torch.inference_mode():
        x = digits_images[:3]
        for k in range(segment):
            x = digits_model.segment(k, 0.5)(x)
        prev = 1.0 if segment == 0 else 0.5
        for instance_width in WIDTHS:
            expected = digits_model.segment(segment, instance_width)(x)
            handle = backend.load(segment, instance_width)
            for requested in (w for w in WIDTHS if w <= instance_width):
                out = _run(backend, handle, SegmentKey(segment, requested, prev), list(x))
                torch.testing.assert_close(torch.stack(out), expected, rtol=1e-4, atol=1e-5)
            backend.unload(handle)


def test_contract_violations_are_refused(backend: TorchBackend, digits_images) -> None:
    handle = backend.load(1, 0.5)
    activation = torch.zeros(16, 8, 8)  # segment 2's input at width 0.25 (16 channels)
    with pytest.raises(ValueError, match="narrower than the requested width"):
        backend.run_batch(handle, SegmentKey(1, 1.0, 0.25), [activation], lambda out: None)
    with pytest.raises(ValueError, match="another segment"):
        backend.run_batch(handle, SegmentKey(2, 0.5, 0.25), [activation], lambda out: None)
    with pytest.raises(ValueError, match=r"previous width 0\.5 gives 32"):
        backend.run_batch(handle, SegmentKey(1, 0.5, 0.5), [activation], lambda out: None)
    got: list = []
    backend.run_batch(handle, SegmentKey(1, 0.5, 0.25), [activation], got.append)
    with pytest.raises(RuntimeError, match="not free"):
        backend.run_batch(handle, SegmentKey(1, 0.5, 0.25), [activation], got.append)
    with pytest.raises(RuntimeError, match="busy"):
        backend.unload(handle)
    assert backend._loop.run_until(lambda: bool(got), timeout_s=30.0)
    assert got[0][0].shape == (64, 4, 4)


def test_a_failing_batch_surfaces_on_the_loop(backend: TorchBackend) -> None:
    handle = backend.load(0, 1.0)
    bad = [torch.zeros(3, 16, 16), torch.zeros(3, 8, 8)]  # cannot be stacked
    backend.run_batch(handle, SegmentKey(0, 1.0, 1.0), bad, lambda out: None)
    with pytest.raises(RuntimeError, match="stack"):
        backend._loop.run_until(lambda: False, timeout_s=30.0)


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("gpu", "expected cpu, cuda or cuda:N"),
        ("cuda:x", "expected cpu, cuda or cuda:N"),
        ("cuda:3", "cuda:3"),
    ],
)
def test_bad_devices_are_clear_errors(device: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_live_device(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a CUDA-less machine")
def test_cuda_without_cuda_is_a_clear_error(digits_model: SlimResNet) -> None:
    with pytest.raises(ConfigError, match="'cuda:3': CUDA is not available"):
        TorchBackend(digits_model, RealTimeLoop(), "cuda:3")


def test_a_checkpoint_path_is_loaded_and_a_missing_one_named(digits_checkpoint, tmp_path) -> None:
    backend = TorchBackend(digits_checkpoint, RealTimeLoop(), "cpu")
    assert backend.name == "cpu"
    backend.close()
    with pytest.raises(DataError, match="checkpoint not found"):
        TorchBackend(tmp_path / "missing.pt", RealTimeLoop(), "cpu")


def test_busy_share_is_the_busy_part_of_its_window() -> None:
    share = BusyShare(window_s=0.2)
    assert share.utilization_pct() == 0.0
    share.started()
    share.started()  # two batches at once count once
    time.sleep(0.05)
    share.finished()
    assert 0.0 < share.utilization_pct() <= 100.0
    share.finished()
    busy = share.utilization_pct()
    assert busy == pytest.approx(25.0, abs=15.0)  # about 0.05 s of a 0.2 s window
    time.sleep(0.25)
    assert share.utilization_pct() == 0.0  # the busy span left the window


def test_busy_share_counts_slots() -> None:
    """With two compute slots, one running batch keeps the device half busy."""
    share = BusyShare(window_s=0.2, slots=2)
    share.started()
    time.sleep(0.2)
    assert share.utilization_pct() == pytest.approx(50.0, abs=5.0)
    share.started()
    time.sleep(0.2)
    assert share.utilization_pct() == pytest.approx(100.0, abs=5.0)
    share.finished()
    share.finished()
    time.sleep(0.01)
    assert share.utilization_pct() < 95.0  # the block on loads lifts within ms of the stop


def test_cpu_batches_compute_in_no_more_slots_than_the_cores_allow(
    monkeypatch: pytest.MonkeyPatch, digits_model: SlimResNet
) -> None:
    monkeypatch.setattr(busy.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(busy.torch, "get_num_threads", lambda: 2)
    assert busy.cpu_compute_slots() == 2
    monkeypatch.setattr(busy.torch, "get_num_threads", lambda: 8)
    assert busy.cpu_compute_slots() == 1
    backend = TorchBackend(digits_model, RealTimeLoop(), "cpu", max_workers=32)
    assert backend.compute_slots == 1
    assert backend.utilization_pct() == 0.0  # the CPU reads its busy share, never a stale one
    backend.close()


def test_instances_of_one_key_share_its_weights_until_the_last_unloads(
    backend: TorchBackend, digits_images: torch.Tensor
) -> None:
    """A scale-up copies nothing: both instances run on one set of weights, counted once; the
    weights leave the device only with the last instance, and come back as the one spare."""
    first, second = backend.load(1, 0.5), backend.load(1, 0.5)
    assert first is not second and first.module is second.module
    assert backend.vram_used_bytes() == first.param_bytes
    first_segment = backend.load(0, 1.0)
    key = SegmentKey(1, 0.5, 1.0)
    inputs = _run(backend, first_segment, SegmentKey(0, 1.0, 1.0), list(digits_images[:6]))
    # two batches at once on the shared weights give what one instance gives alone
    got: dict[int, list[torch.Tensor]] = {}
    backend.run_batch(first, key, inputs[:3], lambda out: got.__setitem__(0, out))
    backend.run_batch(second, key, inputs[3:], lambda out: got.__setitem__(1, out))
    assert backend._loop.run_until(lambda: len(got) == 2, timeout_s=30.0)
    alone = _run(backend, first, key, inputs)
    assert torch.allclose(torch.stack(got[0] + got[1]), torch.stack(alone), atol=1e-6)
    backend.unload(first)
    loaded_bytes = first_segment.param_bytes + second.param_bytes
    assert not backend._offloaded and backend.vram_used_bytes() == loaded_bytes
    assert len(_run(backend, second, key, inputs[:2])) == 2  # the other one still runs
    backend.unload(second)
    assert len(backend._offloaded) == 1
    again = backend.load(1, 0.5)
    assert again.module is first.module and not backend._offloaded  # the spare, moved back
