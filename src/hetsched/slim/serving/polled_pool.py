"""What every server pool shares: per-server up/down state and telemetry polled in the background.

A pool (Ray actors in :mod:`.pool`, threads of the front's own process in :mod:`.local_pool`)
keeps, per server, the latest telemetry snapshot and whether it is up. A server is marked down the
moment one of its calls fails because it died, or when a telemetry poll fails or times out; the
front's router then masks it. The next successful poll marks it up again (a restarted server
rejoins the routing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace

from hetsched.core.devices import DeviceSpec
from hetsched.core.errors import HetschedError
from hetsched.slim.executor.server import ServerTelemetry
from hetsched.slim.serving.metrics import ServerSnapshot

LOG = logging.getLogger(__name__)


class ServerStartError(HetschedError):
    """A server could not start (bad device, bad executor knobs, unreadable model)."""


class PolledServerPool:
    """Up/down state and cached telemetry of named servers, refreshed by a background poller.

    Subclasses implement :meth:`_read_snapshot` (one server's telemetry now) and list the
    exceptions that mean "this server is down" in :attr:`DOWN_ERRORS`.

    Args:
        names: The servers' names (router index order).
        telemetry_interval_s: Seconds between two telemetry polls of each server.
    """

    DOWN_ERRORS: tuple[type[BaseException], ...] = ()

    def __init__(self, names: Sequence[str], telemetry_interval_s: float) -> None:
        self.names = tuple(names)
        self.telemetry_interval_s = telemetry_interval_s
        self._up = [False] * len(self.names)
        self._snapshots = [
            ServerSnapshot(name, False, 0, 0.0, 0, 0.0, 1.0, 0.0, "none", 0, 0)
            for name in self.names
        ]
        self._poller: asyncio.Task | None = None
        self.specs: list[DeviceSpec] = []
        """Each server's device spec, as reported once the server started."""

    async def _read_snapshot(self, index: int) -> ServerSnapshot:
        """Server ``index``'s telemetry now (raises one of :attr:`DOWN_ERRORS` if it is down)."""
        raise NotImplementedError

    def _start_polling(self) -> None:
        self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

    async def _stop_polling(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller

    # -- ServerPool -------------------------------------------------------------------------------

    def is_up(self, index: int) -> bool:
        return self._up[index]

    def telemetry(self, index: int) -> ServerTelemetry:
        snapshot = self._snapshots[index]
        return ServerTelemetry(
            snapshot.queue_length, snapshot.power_w, snapshot.max_power_w, snapshot.utilization_pct
        )

    def snapshots(self) -> list[ServerSnapshot]:
        """The latest snapshot per server, ``up`` as the pool sees it now (for ``/metrics``)."""
        return [
            replace(snapshot, up=up) for snapshot, up in zip(self._snapshots, self._up, strict=True)
        ]

    # -- polling ----------------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.gather(*(self._poll(i) for i in range(len(self.names))))
            await asyncio.sleep(self.telemetry_interval_s)

    async def _poll(self, index: int) -> None:
        timeout_s = max(2.0, 5 * self.telemetry_interval_s)
        down: tuple[type[BaseException], ...] = (*self.DOWN_ERRORS, TimeoutError)
        try:
            snapshot = await asyncio.wait_for(self._read_snapshot(index), timeout_s)
        except down as error:
            self._mark_down(index, error)
            return
        self._snapshots[index] = snapshot
        if not self._up[index]:
            LOG.warning("server %s is up again; it rejoins the routing", self.names[index])
        self._up[index] = True

    def _mark_down(self, index: int, error: BaseException) -> None:
        if self._up[index]:
            LOG.warning("server %s is down: %s", self.names[index], cause(error))
        self._up[index] = False


def cause(error: BaseException) -> str:
    """The innermost message of an error (its ``cause`` when it wraps one, as Ray's do)."""
    inner = getattr(error, "cause", None) or error.__cause__
    if inner is None and getattr(error, "actor_init_failed", False):
        # Ray keeps only the text of an actor's failed constructor: the exception is its last line.
        return str(error).strip().splitlines()[-1].strip()
    return f"{type(inner or error).__name__}: {inner or error}".splitlines()[0]
