"""The servers as threads of the front's own process: the one-host pool, no Ray.

On one machine, the Ray path costs every segment of every image a trip through the object store
and an actor's event loop; a single-process server with the same model serves three times as many
images on two cores (benchmarks/RESULTS.md, "the single-process baseline"). This pool runs the
same :class:`~.worker.SegmentWorker` (Algorithm 1 on the live torch backend, one real-time loop
thread per server) inside the front's process: a block is handed to the worker directly and
activations stay numpy arrays in this process's memory, so routing, batching and the router's
choices are unchanged while the per-hop costs go.

What it gives up is isolation: a server is a thread, so a crash of the process takes every server
and every request in flight with it (``kill -9`` of the front is a total outage, where the Ray
pool loses one server and re-routes). A server whose executor loop crashes is found by the next
telemetry poll: its blocks in flight fail as :class:`~.blocks.ServerFailedError` (the front
re-routes their images), it is marked down and rebuilt from the checkpoint in the background, and
the poll after that lets it rejoin.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetsched.slim.serving.blocks import BlockItem, ItemResult, ServerFailedError
from hetsched.slim.serving.config import ServerConfig
from hetsched.slim.serving.metrics import ServerSnapshot
from hetsched.slim.serving.polled_pool import PolledServerPool, ServerStartError, cause
from hetsched.slim.serving.pool import server_payload
from hetsched.slim.serving.worker import SegmentWorker, worker_from_checkpoint

LOG = logging.getLogger(__name__)


class LocalServerPool(PolledServerPool):
    """One :class:`~.worker.SegmentWorker` per server, in this process.

    Args:
        servers: The configured servers (router index order); a server computes ``num_cpus //
            torch_threads`` batches at once (at least one) on threads reniced by its ``nice``
            (the front's thread keeps its priority).
        checkpoint: The model checkpoint dict.
        executor_config: Algorithm 1's knobs for every executor.
        telemetry_interval_s: Seconds between two telemetry polls of each server.
    """

    DOWN_ERRORS = (RuntimeError,)

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        checkpoint: dict[str, Any],
        executor_config: dict[str, Any],
        telemetry_interval_s: float = 0.2,
    ) -> None:
        super().__init__([server.name for server in servers], telemetry_interval_s)
        self._servers = tuple(servers)
        self._torch_threads = max((server.torch_threads for server in servers), default=1)
        """One process, one torch thread pool: the largest of the servers' values."""
        self._payload = server_payload(checkpoint)
        self._executor_config = executor_config
        self._workers: list[SegmentWorker | None] = [None] * len(servers)
        self._running: list[set[asyncio.Task]] = [set() for _ in servers]
        """Per server, its blocks in flight (cancelled when the server is found crashed)."""
        self._restarts: dict[int, asyncio.Task] = {}

    async def start(self) -> None:
        """Builds every server's worker (off the event loop: a model takes seconds to load).

        Raises:
            ServerStartError: Naming the server that failed to start and why.
        """
        for index in range(len(self._servers)):
            try:
                worker = await asyncio.to_thread(self._build, index)
            except Exception as error:
                await self.stop()
                raise ServerStartError(
                    f"server {self.names[index]!r} did not start: {cause(error)}"
                ) from None
            self._workers[index] = worker
            self.specs.append(worker.backend.spec)
            self._snapshots[index] = await worker.snapshot()
            self._up[index] = True
        self._start_polling()

    async def stop(self) -> None:
        """Stops polling and restarts, and every server's loop and backend threads."""
        await self._stop_polling()
        for task in self._restarts.values():
            task.cancel()
        await asyncio.gather(*self._restarts.values(), return_exceptions=True)
        for index, worker in enumerate(self._workers):
            if worker is not None:
                _close(worker)
                self._workers[index] = None

    # -- ServerPool -------------------------------------------------------------------------------

    async def run_block(
        self, index: int, width: float, items: Sequence[BlockItem]
    ) -> list[ItemResult]:
        worker = self._workers[index]
        if worker is None or not self._up[index]:
            raise ServerFailedError(f"{self.names[index]}: not running")
        try:
            worker.check_alive()
        except RuntimeError as error:
            self._fail(index, error)
            raise ServerFailedError(f"{self.names[index]}: {cause(error)}") from None
        task = asyncio.ensure_future(
            worker.run_block(
                width, [(item.segment, item.prev_width, item.payload) for item in items]
            )
        )
        self._running[index].add(task)
        try:
            outputs = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if worker.crash is None or (current is not None and current.cancelling()):
                raise  # cancelled by our caller, not by a crash of the server
            raise ServerFailedError(f"{self.names[index]}: executor loop crashed") from None
        finally:
            self._running[index].discard(task)
        return [
            ItemResult(out.executed_width, out.output, out.queue_s, out.compute_s)
            for out in outputs
        ]

    async def fetch(self, payload: Any) -> np.ndarray:
        return payload

    # -- telemetry and restarts -----------------------------------------------------------------

    async def _read_snapshot(self, index: int) -> ServerSnapshot:
        worker = self._workers[index]
        if worker is None:
            raise RuntimeError("restarting")
        try:
            return await worker.snapshot()
        except RuntimeError as error:
            self._fail(index, error)
            raise

    def _fail(self, index: int, error: BaseException) -> None:
        """Marks server ``index`` down, fails its blocks in flight (their completions died with
        its loop) and rebuilds it in the background (once)."""
        self._mark_down(index, error)
        for task in self._running[index]:
            task.cancel()
        if index not in self._restarts:
            task = asyncio.get_running_loop().create_task(self._restart(index))
            self._restarts[index] = task

    async def _restart(self, index: int) -> None:
        old, self._workers[index] = self._workers[index], None
        if old is not None:
            await asyncio.to_thread(_close, old)
        try:
            self._workers[index] = await asyncio.to_thread(self._build, index)
            LOG.warning("server %s rebuilt after a crash", self.names[index])
        except Exception:
            LOG.exception("server %s could not be rebuilt; it stays down", self.names[index])
        finally:
            del self._restarts[index]

    def _build(self, index: int) -> SegmentWorker:
        server = self._servers[index]
        return worker_from_checkpoint(
            server.name,
            self._payload,
            server.device,
            self._executor_config,
            server.spec,
            compute_slots=server.compute_slots(self._torch_threads),
            torch_threads=self._torch_threads,
            nice=server.nice,
        )


def _close(worker: SegmentWorker) -> None:
    """Ends a worker's threads; a crashed loop's exception was already reported."""
    try:
        worker.close()
    except Exception as error:  # the loop's recorded crash, re-raised by its join
        LOG.debug("closing %s: %s", worker.name, error)
