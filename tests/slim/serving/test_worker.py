"""The in-actor worker without Ray: executor + live backend + loop, bridged to asyncio."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.serving.pool import server_payload
from hetsched.slim.serving.worker import SegmentWorker, worker_from_checkpoint


@pytest.fixture
def model() -> SlimResNet:
    torch.manual_seed(0)
    return SlimResNet(num_classes=10).eval()


@pytest.fixture
def worker(model):
    # t_idle far beyond a test: on a loaded CI host the blocks can be seconds apart, and an
    # instance offloaded between them would empty the snapshot the test reads.
    worker = SegmentWorker(model, "cpu", ExecutorConfig(idle_unload_s=600.0), "w0")
    yield worker
    worker.close()


def test_blocks_run_the_segments_the_whole_model_runs(worker, model):
    images = np.random.default_rng(0).normal(size=(3, 3, 8, 8)).astype(np.float32)
    widths = (0.5, 1.0, 0.25, 0.75)

    async def four_segments():
        items = [(0, 1.0, x) for x in images]
        for width in widths:
            results = await worker.run_block(width, items)
            items = [(items[0][0] + 1, r.executed_width, r.output) for r in results]
        return results

    results = asyncio.run(four_segments())
    with torch.inference_mode():
        expected = model(torch.from_numpy(images), widths).numpy()
    np.testing.assert_allclose(np.stack([r.output for r in results]), expected, atol=1e-4)
    assert all(r.compute_s > 0 and r.queue_s >= 0 for r in results)
    snapshot = asyncio.run(worker.snapshot())
    assert snapshot.instance_loads == 4 and snapshot.energy_source == "power-model"
    assert snapshot.vram_used_bytes > 0  # the loaded instances' weights


def test_a_refused_request_fails_its_item_and_the_loop_goes_on(worker):
    x = np.zeros((3, 8, 8), np.float32)
    with pytest.raises(Exception, match="not in the executor's W"):
        asyncio.run(worker.run_block(0.3, [(0, 1.0, x)]))
    (result,) = asyncio.run(worker.run_block(1.0, [(0, 1.0, x)]))
    assert result.output.shape == (64, 8, 8)


def test_a_block_crosses_back_to_the_caller_once_not_once_per_item(worker):
    """Each cross-thread call wakes the caller's event loop; a block of five is one call."""
    images = np.random.default_rng(1).normal(size=(5, 3, 8, 8)).astype(np.float32)

    async def run_counting():
        loop = asyncio.get_running_loop()
        calls = []
        original = loop.call_soon_threadsafe

        def counting(callback, *args, **kwargs):
            calls.append(callback)
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        results = await worker.run_block(1.0, [(0, 1.0, x) for x in images])
        return results, calls

    results, calls = asyncio.run(run_counting())
    assert len(results) == 5 and len(calls) == 1
    assert asyncio.run(worker.run_block(1.0, [])) == []


def test_read_only_and_other_dtype_inputs_are_copied_and_never_written(worker, model):
    """Ray hands object-store arrays over read-only; a float64 image must still run as float32."""
    images = np.random.default_rng(2).normal(size=(2, 3, 8, 8))
    read_only = images[0].astype(np.float32)
    read_only.setflags(write=False)
    kept = (read_only.copy(), images[1].copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it wraps a non-writable array
        results = asyncio.run(worker.run_block(1.0, [(0, 1.0, read_only), (0, 1.0, images[1])]))
    np.testing.assert_array_equal(read_only, kept[0])
    np.testing.assert_array_equal(images[1], kept[1])
    batch = torch.from_numpy(np.stack([kept[0], kept[1].astype(np.float32)]))
    with torch.inference_mode():
        expected = model.segments[0](batch, 1.0).numpy()
    np.testing.assert_allclose(np.stack([r.output for r in results]), expected, atol=1e-4)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread niceness is Linux's")
def test_a_nicer_server_lowers_its_own_threads_and_not_the_callers(model):
    """``pool: local``: the server shares the front's process; only its threads give way."""
    worker = SegmentWorker(model, "cpu", ExecutorConfig(), "nicer", nice=5)
    try:
        x = np.zeros((3, 8, 8), np.float32)
        asyncio.run(worker.run_block(1.0, [(0, 1.0, x)]))  # starts a batch thread
        loop_tid = []
        worker.loop.call_soon_threadsafe(lambda: loop_tid.append(threading.get_native_id()))
        while not loop_tid:
            time.sleep(0.001)
        batch_tids = [t.native_id for t in worker.backend._pool._threads]
        caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        expected = min(19, caller + 5)
        assert os.getpriority(os.PRIO_PROCESS, loop_tid[0]) == expected
        assert batch_tids and all(
            os.getpriority(os.PRIO_PROCESS, tid) == expected for tid in batch_tids
        )
    finally:
        worker.close()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == caller


def test_a_crashed_loop_is_reported(worker):
    def fail() -> None:
        raise ValueError("batch failed")

    worker.loop.call_soon_threadsafe(fail)
    with pytest.raises(RuntimeError, match="executor loop crashed") as caught:
        for _ in range(100):
            worker.check_alive()
            asyncio.run(asyncio.sleep(0.01))
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_server_gets_the_weights_and_not_the_training_state(digits_checkpoint):
    """The optimizer's state is twice the weights: no server should hold or receive it."""
    checkpoint = load_checkpoint(digits_checkpoint)
    payload = server_payload(checkpoint)
    assert "optimizer" in checkpoint and set(payload) <= {"format", "architecture", "state_dict"}
    worker = worker_from_checkpoint("w0", payload, "cpu", {})
    try:
        expected = model_from_checkpoint(checkpoint).state_dict()
        for name, tensor in worker.backend._model.state_dict().items():
            assert torch.equal(tensor, expected[name])
    finally:
        worker.close()
