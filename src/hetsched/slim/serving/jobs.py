"""An accepted image on its way through the segments, its answer, and the width policy.

:class:`Job` is the front's record of one image (where it is, what ran it, how long it waited);
:class:`ImageResult` is what the HTTP layer answers for it. The width functions are the front's
policy on routed widths: a block runs at the router's width, capped by load shedding
(:func:`width_cap`: from ``shed_from`` of the admission budget on, narrower widths as the system
fills, so that overload first costs accuracy and only then refusals) and raised to the block's
accuracy floor (the largest ``min_width`` its requests asked for, :func:`width_floor`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetsched.slim.model.slimresnet import NUM_SEGMENTS
from hetsched.slim.serving.images import RequestError


@dataclass(frozen=True)
class ImageResult:
    """One served image."""

    logits: np.ndarray
    widths: tuple[float, ...]
    servers: tuple[str, ...]
    """Server that ran each segment."""
    latency_s: float
    """Acceptance to answer."""
    queue_s: float
    """Time waiting: global FIFO plus executor queues, over all segments."""
    compute_s: float
    """Sum of the durations of the batches that ran it."""
    reroutes: int
    """Times one of its segments was re-routed after a server failure."""


@dataclass
class Job:
    """One accepted image moving through the segments."""

    image_id: int
    image: Any
    arrival_s: float
    deadline_s: float | None
    """Absolute time (front clock) by which it must be answered; None: no deadline."""
    min_width: float
    """No segment runs narrower (the request's accuracy floor; the narrowest width if none)."""
    future: asyncio.Future[ImageResult]
    fifo_enter_s: float
    segment: int = 0
    payload: Any = None
    widths: list[float] = field(default_factory=list)
    servers: list[str] = field(default_factory=list)
    failures: int = 0
    reroutes: int = 0
    queue_s: float = 0.0
    compute_s: float = 0.0
    abandoned: bool = False
    """Answered 504 at its deadline while still queued or in a server; it is dropped (and its
    admission slot freed) at its next segment boundary."""

    @property
    def unwanted(self) -> bool:
        """Nobody waits for its answer any more (answered at its deadline, or its client left):
        it should run no further segment."""
        return self.abandoned or self.future.cancelled()

    def deadline_error(self, now_s: float) -> RequestError:
        """The 504 it gets when its deadline passed while it waited."""
        return RequestError(
            504,
            f"deadline passed after {now_s - self.arrival_s:.3f} s, at segment"
            f" {self.segment + 1} of {NUM_SEGMENTS}",
            "deadline_exceeded",
        )

    def servers_failed_error(self, failure: Exception) -> RequestError:
        """The 503 it gets when its segment failed on too many servers."""
        return RequestError(
            503,
            f"segment {self.segment + 1} failed on {self.failures} servers (last: {failure})",
            "servers_failed",
        )

    def result(self, logits: Any, now_s: float) -> ImageResult:
        """Its answer, from the last segment's logits."""
        return ImageResult(
            np.asarray(logits),
            tuple(self.widths),
            tuple(self.servers),
            now_s - self.arrival_s,
            self.queue_s,
            self.compute_s,
            self.reroutes,
        )

    def restart(self) -> None:
        """Back to segment 0 with the original image (its activation was lost)."""
        self.segment, self.payload = 0, None
        self.widths.clear()
        self.servers.clear()


def width_floor(widths: Sequence[float], min_width: float | None) -> float:
    """The narrowest of ``widths`` at or above ``min_width`` (the narrowest of all for None).

    Raises:
        RequestError: 422 when every width is narrower.
    """
    if min_width is None:
        return min(widths)
    allowed = [w for w in widths if w >= min_width - 1e-9]
    if not allowed:
        raise RequestError(
            422,
            f"min_width {min_width:g} is above the widest served width {max(widths):g}",
            "min_width_unavailable",
        )
    return min(allowed)


def width_cap(widths: Sequence[float], used: float, shed_from: float) -> float:
    """The widest width the router may use with ``used`` of the admission budget taken: every
    width below ``shed_from``, then narrower as the system fills (1.0: never shed)."""
    ordered = sorted(widths)
    if used < shed_from or shed_from >= 1.0:
        return ordered[-1]
    headroom = max(0.0, (1.0 - used) / (1.0 - shed_from))
    return ordered[int(headroom * (len(ordered) - 1))]
