"""What the routing front and a server pool exchange: blocks of items, results, failures.

The front (:mod:`.front`) sends a block of items (one image's next segment each) to one server
and gets one :class:`ItemResult` per item back, or an exception that says what to do with the
images: :class:`ServerFailedError` (re-route them), :class:`PayloadLostError` (restart them from
segment 0). :class:`ServerPool` is the contract: Ray actors live (:mod:`.pool`), fakes in tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hetsched.slim.executor.server import ServerTelemetry


@dataclass(frozen=True)
class BlockItem:
    """One image's next segment, as sent to a server."""

    segment: int
    prev_width: float
    payload: Any
    """The segment's input: the image (segment 0) or the previous segment's output handle."""


@dataclass(frozen=True)
class ItemResult:
    """What a server reports for one item of a block."""

    executed_width: float
    """Width actually run (FINDFREEBESTFIT may pick a wider instance than requested)."""
    output: Any
    """Handle of the output activation (logits after the last segment)."""
    queue_s: float
    """Time in the server's executor queue."""
    compute_s: float
    """Duration of the batch that ran it."""


class ServerFailedError(Exception):
    """The server died or became unreachable; its block's images should be re-routed."""


class PayloadLostError(Exception):
    """An input activation is gone (its host died); the images must restart from segment 0."""


class ServerPool(Protocol):
    """What the front needs from the servers (Ray actors live; fakes in unit tests)."""

    names: tuple[str, ...]

    def is_up(self, index: int) -> bool:
        """Whether server ``index`` is serving (False while dead or restarting)."""

    def telemetry(self, index: int) -> ServerTelemetry:
        """The latest telemetry of server ``index`` (power, utilisation; queue is the front's)."""

    async def run_block(
        self, index: int, width: float, items: Sequence[BlockItem]
    ) -> list[ItemResult]:
        """Runs each item's segment at ``width`` on server ``index``.

        Raises:
            ServerFailedError: The server died (or was found dead) before answering.
            PayloadLostError: An input could not be fetched.
        """

    async def fetch(self, payload: Any) -> np.ndarray:
        """The value behind an output handle (the logits of a finished image).

        Raises:
            PayloadLostError: The value is gone (its host died).
        """
