"""The Ray actor of one server: a :class:`~.worker.SegmentWorker` behind Ray's async actor API.

An async actor runs many ``run_block`` calls at once on its event loop, which is what lets the
executor batch requests from different blocks. ``run_block`` takes the block's inputs as
top-level arguments, so Ray resolves object refs (activations that another server produced)
before the call runs, fetching them from whichever node holds them; it returns one object per
input plus a small metadata object, so the front waits on the metadata alone and passes the
activations on to the next server as refs, never through its own process.

An executor whose loop crashed leaves the process (exit code 1) so that Ray restarts the actor
(``max_restarts``): to the front that is a server failure, and its images are re-routed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import ray

from hetsched.core.gc_pauses import freeze_startup_objects
from hetsched.slim.serving.metrics import ServerSnapshot
from hetsched.slim.serving.priority import lower_process_priority
from hetsched.slim.serving.worker import worker_from_checkpoint

LOG = logging.getLogger(__name__)
WATCHDOG_INTERVAL_S = 0.1


@ray.remote(max_restarts=-1, max_task_retries=0)
class ServerActor:
    """One server. Created by :class:`~hetsched.slim.serving.pool.RayServerPool`.

    Args:
        name: The server's name.
        checkpoint: The checkpoint dict (``hetsched.slim.model.checkpoint.load_checkpoint``), passed
            through the object store so that hosts need no shared file system.
        device: ``cpu`` or ``cuda`` (Ray makes the assigned GPU ``cuda:0``).
        executor_config: Algorithm 1's knobs (``ExecutorConfig`` fields).
        spec: Device spec name or profile JSON for the power model, or None for the default.
        nice: Niceness added to the actor's process before it loads the model (0: none).
        torch_threads: Intra-op threads of the actor's batches.
        compute_slots: Batches it computes at once (None: the backend's default).
    """

    def __init__(
        self,
        name: str,
        checkpoint: dict[str, Any],
        device: str,
        executor_config: dict[str, Any],
        spec: str | None,
        nice: int = 0,
        torch_threads: int = 1,
        compute_slots: int | None = None,
    ) -> None:
        if nice:
            lower_process_priority(nice)
        self.worker = worker_from_checkpoint(
            name,
            checkpoint,
            device,
            executor_config,
            spec,
            compute_slots=compute_slots,
            torch_threads=torch_threads,
        )
        freeze_startup_objects()  # full collections between batches walk only new objects
        self._watchdog: asyncio.Task | None = None

    async def run_block(
        self, width: float, segments: list[int], prev_widths: list[float], *inputs: Any
    ) -> tuple:
        """Runs one block; returns (metadata, output 0, output 1, ...).

        The metadata is one ``(executed_width, queue_s, compute_s)`` per input.
        """
        self._ensure_watchdog()
        results = await self.worker.run_block(
            width, list(zip(segments, prev_widths, inputs, strict=True))
        )
        metadata = [(r.executed_width, r.queue_s, r.compute_s) for r in results]
        return (metadata, *(r.output for r in results))

    async def snapshot(self) -> ServerSnapshot:
        """Telemetry now (utilisation, VRAM, power, energy and its source, loads/unloads)."""
        self._ensure_watchdog()
        return await self.worker.snapshot()

    def device_spec(self) -> dict[str, Any]:
        """The device spec this server's power model and the front's predictions use."""
        return self.worker.backend.spec.model_dump(mode="json")

    def pid(self) -> int:
        """The actor's process id (tests kill it from outside to simulate a crash)."""
        return os.getpid()

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_INTERVAL_S)
            try:
                self.worker.check_alive()
            except RuntimeError:
                LOG.exception("server %s: exiting so that Ray restarts it", self.worker.name)
                os._exit(1)
