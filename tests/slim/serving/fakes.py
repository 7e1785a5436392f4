"""A fake server pool for the front's unit tests: asyncio only, servers that can die and rejoin."""

from __future__ import annotations

import asyncio

import numpy as np

from hetsched.core.events import WallClock
from hetsched.slim.executor.server import ServerTelemetry
from hetsched.slim.routers import ROUTERS
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.blocks import ItemResult, PayloadLostError, ServerFailedError
from hetsched.slim.serving.config import ServeConfig
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import InputSpec
from hetsched.slim.serving.metrics import ServingMetrics

NUM_CLASSES = 10
SPEC = InputSpec(3, 8, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), tuple("0123456789"))
"""The fake model's input: 3 x 8 x 8, like the digits model of the end-to-end tests."""


def array_label(image: np.ndarray) -> int:
    """The label the fake servers give an array input (a function of its values)."""
    return int(np.abs(image.astype(np.float64)).sum()) % NUM_CLASSES  # float64: no overflow


class FakePool:
    """Servers that run a block in ``seconds`` and pass a label along as the activation.

    The image payload is an int label (or an array, labelled by :func:`array_label`); each
    segment's output is ``(label, segment)``, and the last segment's output fetches as one-hot
    logits of the label, so a test can check that every image got its own answer. ``kill(i)``
    fails the blocks running on server i (as Ray does when an actor dies) and masks it until
    ``revive(i)``.
    """

    def __init__(self, n_servers: int = 2, seconds: float = 0.002) -> None:
        self.names = tuple(f"s{i}" for i in range(n_servers))
        self.seconds = seconds
        self.up = [True] * n_servers
        self.calls: list[tuple[int, bool]] = []
        """(server, up at the time) of every block sent."""
        self.error: Exception | None = None
        self.lose_payloads_once = False
        self.lose_results_once = False
        self._running: list[set[asyncio.Future]] = [set() for _ in range(n_servers)]

    def is_up(self, index: int) -> bool:
        return self.up[index]

    def telemetry(self, index: int) -> ServerTelemetry:
        return ServerTelemetry(0, 50.0, 100.0, 10.0 * index)

    async def run_block(self, index, width, items):
        self.calls.append((index, self.up[index]))
        if not self.up[index]:
            raise ServerFailedError(f"{self.names[index]} is dead")
        if self.error is not None:
            raise self.error
        if self.lose_payloads_once and any(item.segment > 0 for item in items):
            self.lose_payloads_once = False
            raise PayloadLostError("activation lost")
        done = asyncio.get_running_loop().create_future()
        self._running[index].add(done)
        asyncio.get_running_loop().call_later(self.seconds, _resolve, done)
        try:
            await done
        finally:
            self._running[index].discard(done)
        results = []
        for item in items:
            if item.segment > 0:
                label = item.payload[0]
            elif isinstance(item.payload, np.ndarray):
                label = array_label(item.payload)
            else:
                label = item.payload
            assert item.segment == 0 or item.payload[1] == item.segment - 1
            results.append(ItemResult(width, (label, item.segment), 0.0, self.seconds))
        return results

    async def fetch(self, payload):
        if self.lose_results_once:
            self.lose_results_once = False
            raise PayloadLostError("result lost")
        label, segment = payload
        assert segment == 3
        logits = np.zeros(NUM_CLASSES, dtype=np.float32)
        logits[label] = 1.0
        return logits

    def running(self, index: int) -> int:
        """Blocks now running on server ``index``."""
        return len(self._running[index])

    def kill(self, index: int) -> None:
        self.up[index] = False
        for done in list(self._running[index]):
            if not done.done():
                done.set_exception(ServerFailedError(f"{self.names[index]} died"))

    def revive(self, index: int) -> None:
        self.up[index] = True


class FakeService:
    """A serving system over a :class:`FakePool` (no Ray, no model): what the app needs."""

    def __init__(self, config: ServeConfig, pool: FakePool | None = None) -> None:
        self.config = config
        self.metrics = ServingMetrics()
        self.pool = pool or FakePool()
        self.front: Front | None = None
        self.input_spec: InputSpec | None = None

    async def start(self) -> None:
        self.input_spec = SPEC
        self.front = Front(
            self.pool,
            ROUTERS.create("random", seed=0),
            AdmissionController(self.config.admission.max_images_in_system),
            WallClock(),
            self.metrics,
            widths=self.config.widths,
            group_sizes=(1, 4, 8),
            shed_from=self.config.admission.shed_from,
        )
        self.front.start()

    async def stop(self) -> None:
        if self.front is not None:
            await self.front.stop()


def _resolve(future: asyncio.Future) -> None:
    """Completes a fake block's wait unless it was cancelled (its server was killed)."""
    if not future.done():
        future.set_result(None)
