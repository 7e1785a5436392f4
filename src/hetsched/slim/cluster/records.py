"""What the cluster keeps per image and per routed block while they move, and per finished image.

Slotted dataclasses: the simulated cluster creates one :class:`ImageRequest` per image and one
:class:`Block` per routing decision, and issue 19's speed target (>= 200k segment-requests per CPU
second) leaves no room for a frozen dataclass's construction or a ``__dict__`` per object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Block:
    """The requests one routing decision sent together (their eq. 7 outcome is measured when the
    last of them finishes its segment)."""

    decision_id: int
    remaining: int
    """Requests of the block still running their segment."""
    requests: int
    """Requests the block started with (g, or fewer when the FIFO was shorter)."""
    accuracy_signals: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    images_completed: int = 0


@dataclass(slots=True)
class ImageRequest:
    """One image moving through the segments."""

    image_id: int
    arrival_s: float
    fifo_enter_s: float
    """When it (re-)entered the global FIFO for its current segment."""
    deadline_s: float = math.inf
    """When the image must be complete to meet its SLO (arrival + the cluster's ``slo_s``)."""
    segment: int = 0
    widths: list[float] = field(default_factory=list)
    """Widths actually executed so far (w_prev is the last one)."""
    location: int | None = None
    """Server holding its activation (None: still at the router's host)."""
    energy_j: float = 0.0
    """Σ over its segments of P̄ · L (eq. 7's E), the paper's per-image energy."""
    payload: Any = None
    """Its current activation when servers compute for real (the image, then each segment's
    output); None in simulation."""
    server: int = 0
    """Server of its current segment."""
    block: Block | None = None
    """Block of its current segment."""
    booked_s: float = 0.0
    """Backlog its current segment booked on its server (released when the segment is done)."""


@dataclass(slots=True)
class CompletedImage:
    """One image that finished all segments (a result record; read-only)."""

    image_id: int
    latency_s: float
    energy_j: float
    widths: tuple[float, ...]
    correct: bool
    finished_s: float = 0.0
    """When its last segment finished (cluster clock)."""
    deadline_s: float = math.inf
    """When it had to be finished to meet its SLO."""
    arrival_s: float = 0.0
    """When it arrived."""

    @property
    def met_slo(self) -> bool:
        """Finished by its deadline."""
        return self.finished_s <= self.deadline_s
