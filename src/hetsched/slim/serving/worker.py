"""One server inside its process: a greedy executor on the live torch backend, on its own loop.

The executor (Algorithm 1) is single-threaded: its state may only be touched on the thread of its
:class:`~hetsched.core.realtime.RealTimeLoop`. The worker is the bridge between that thread and
an asyncio caller (the Ray actor's event loop): every call crosses with
``call_soon_threadsafe`` in one direction and ``asyncio``'s ``call_soon_threadsafe`` in the
other, so many blocks can wait at once while the executor batches their requests by key.

A callback that raises ends a real-time loop (the backend posts a failed batch's exception to the
loop); the worker reports that as :attr:`SegmentWorker.crash` so its owner can end the server
rather than leave requests waiting for a loop that is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from hetsched.core.config import validate_config
from hetsched.core.devices import DeviceSpec, load_device
from hetsched.core.realtime import RealTimeLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.live.torch_backend import TorchBackend
from hetsched.slim.model.checkpoint import model_from_checkpoint
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.serving.metrics import ServerSnapshot
from hetsched.slim.serving.priority import lower_thread_priority


@dataclass(frozen=True)
class SegmentOutput:
    """One item's result inside the worker: what the front's ``ItemResult`` is built from."""

    executed_width: float
    output: np.ndarray
    queue_s: float
    compute_s: float


class SegmentWorker:
    """A greedy executor on a :class:`TorchBackend`, driven by its own real-time loop thread.

    Args:
        model: The trained SlimResNet (instances are extracted from it on demand, so the device
            only ever holds the (segment, width) instances the executor loaded).
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        config: Algorithm 1's knobs.
        name: The server's name.
        spec: Device spec for the power model (default: the backend's datasheet choice).
        compute_slots: Batches that may compute at once (default: the backend's, every core of
            this process on the CPU; servers that share a process take their share).
        nice: Niceness added to this server's threads (its loop and, started from it, its batch
            threads), for servers that share a process with the front (0: none).
    """

    def __init__(
        self,
        model: SlimResNet,
        device: str,
        config: ExecutorConfig,
        name: str,
        spec: DeviceSpec | None = None,
        compute_slots: int | None = None,
        nice: int = 0,
    ) -> None:
        self.name = name
        self.loop = RealTimeLoop()
        self.backend = (
            TorchBackend(model, self.loop, device, spec=spec, name=name)
            if compute_slots is None
            else TorchBackend(
                model, self.loop, device, spec=spec, name=name, max_workers=compute_slots
            )
        )
        self.executor = GreedyExecutor(self.backend, self.loop, config, name)
        self.crash: BaseException | None = None
        self.loop.start()
        if nice:  # first on the loop's thread: before it starts any batch thread
            self.loop.call_soon_threadsafe(partial(lower_thread_priority, nice))

    async def run_block(
        self, width: float, items: Sequence[tuple[int, float, np.ndarray]]
    ) -> list[SegmentOutput]:
        """Runs each (segment, previous width, input) at ``width``; returns when all are done.

        The block crosses between the caller's loop and the executor's thread once each way (not
        once per item): on a busy one-host front every cross-thread call wakes its event loop.

        Raises:
            Exception: What the executor raised for a request it refused (e.g. a width not in W);
                the block's items after it are not submitted.
        """
        if not items:
            return []
        aio = asyncio.get_running_loop()
        block: asyncio.Future[list[SegmentOutput]] = aio.create_future()
        inputs = [torch.from_numpy(_float32_input(x)) for _, _, x in items]
        self.loop.call_soon_threadsafe(lambda: self._submit(aio, width, items, inputs, block))
        return await block

    def _submit(self, aio, width, items, inputs, block) -> None:
        """On the loop thread: one executor request per item; the last one done settles the
        block's future."""
        outputs: list[SegmentOutput | None] = [None] * len(items)
        pending = [len(items)]

        def finish(index: int, output: SegmentOutput) -> None:
            outputs[index] = output
            pending[0] -= 1
            if pending[0] == 0:
                aio.call_soon_threadsafe(_settle, block, outputs, None)

        for index, ((segment, prev_width, _), payload) in enumerate(
            zip(items, inputs, strict=True)
        ):
            enqueued_s = self.loop.now_s()

            def done(executed_width: float, output: torch.Tensor, index=index, t0=enqueued_s):
                # The backend appends a batch's compute time just before it calls ``done``.
                compute_s = self.backend.batch_latencies_s[-1]
                queue_s = max(0.0, self.loop.now_s() - t0 - compute_s)
                finish(index, SegmentOutput(executed_width, output.numpy(), queue_s, compute_s))

            try:
                self.executor.submit(segment, width, prev_width, done, payload=payload)
            except Exception as error:  # refused: answer the block, keep the loop alive
                aio.call_soon_threadsafe(_settle, block, None, error)
                return

    async def snapshot(self) -> ServerSnapshot:
        """The server's telemetry now, read on the loop thread; also checks the loop is alive."""
        self.check_alive()
        future = asyncio.get_running_loop().create_future()
        aio = asyncio.get_running_loop()

        def settle() -> None:  # on the loop thread: read there, hand over to the caller's loop
            aio.call_soon_threadsafe(_settle, future, self._read_snapshot(), None)

        self.loop.call_soon_threadsafe(settle)
        return await future

    def check_alive(self) -> None:
        """Records (and raises) the exception that ended the loop, if it ended."""
        if self.crash is None:
            try:
                self.loop.join(0.0)
            except BaseException as error:
                self.crash = error
        if self.crash is not None:
            raise RuntimeError(f"server {self.name}: executor loop crashed") from self.crash

    def _read_snapshot(self) -> ServerSnapshot:
        executor, backend = self.executor, self.backend
        telemetry = executor.telemetry()
        energy_j, source = executor.energy()
        record = executor.record
        snapshot = ServerSnapshot(
            name=self.name,
            up=True,
            queue_length=telemetry.queue_length,
            utilization_pct=telemetry.utilization_pct,
            vram_used_bytes=backend.vram_used_bytes(),
            power_w=telemetry.power_w,
            max_power_w=telemetry.max_power_w,
            energy_j=energy_j,
            energy_source=source,
            instance_loads=record.loads,
            instance_unloads=record.unloads,
        )
        _trim(self)
        return snapshot

    def close(self) -> None:
        """Stops the loop and the backend's workers."""
        self.loop.stop()
        self.backend.close()


def worker_from_checkpoint(
    name: str,
    checkpoint: dict[str, Any],
    device: str,
    executor_config: dict[str, Any],
    spec: str | None = None,
    compute_slots: int | None = None,
    torch_threads: int = 1,
    nice: int = 0,
) -> SegmentWorker:
    """A server's worker as a server process builds it: ``torch_threads`` intra-op threads (one by
    default: servers on one host must not fight over cores), the model from the checkpoint dict,
    the validated executor knobs.

    Raises:
        ConfigError: For bad executor knobs or an unknown device spec.
    """
    torch.set_num_threads(torch_threads)
    return SegmentWorker(
        model_from_checkpoint(checkpoint).eval(),
        device,
        validate_config(executor_config, ExecutorConfig, "executor"),
        name,
        load_device(spec) if spec else None,
        compute_slots,
        nice,
    )


def _trim(worker: SegmentWorker) -> None:
    """Drops the per-request records the executor and backend keep for offline reports.

    A server runs for days; those lists would grow without bound. The front keeps its own
    Prometheus histograms of the same durations, so nothing is lost for serving.
    """
    record = worker.executor.record
    record.queue_durations_s.clear()
    record.request_durations_s.clear()
    for column in vars(record.series).values():
        column.clear()
    worker.backend.batch_latencies_s.clear()


def _float32_input(x: np.ndarray) -> np.ndarray:
    """``x`` as a float32 array torch may wrap without a copy: copied only when it is of another
    dtype, not contiguous or read-only (Ray hands object-store arrays over read-only). Sharing is
    safe: the backend stacks a batch's inputs into a new tensor before it computes."""
    x = np.asarray(x)
    if x.dtype == np.float32 and x.flags.c_contiguous and x.flags.writeable:
        return x
    return np.array(x, dtype=np.float32)


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller gave up (cancelled); nothing to deliver
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
