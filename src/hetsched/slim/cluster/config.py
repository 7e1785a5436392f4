"""The cluster's knobs and what it needs from its clock and its link (types only)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hetsched.core.events import EventHandle


class EventClock(Protocol):
    """The clock the cluster runs on: ``now_s`` plus scheduling and stepping (EventLoop-like)."""

    def now_s(self) -> float: ...

    def schedule(
        self, at_s: float, callback: Callable[[], None], priority: int = 0
    ) -> EventHandle: ...

    def schedule_in(
        self, delay_s: float, callback: Callable[[], None], priority: int = 0
    ) -> object: ...

    def step(self) -> bool: ...


@dataclass
class ClusterConfig:
    """Mechanism knobs of the cluster (the executors have their own)."""

    num_segments: int = 4
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    group_sizes: tuple[int, ...] = (1, 4, 8, 16)
    decision_time_s: float = 0.001
    """The router's own time per decision: it places one block per interval, so bursts queue in
    the global FIFO and the group size g matters."""
    slo_s: float = math.inf
    """Each image's deadline is its arrival plus this (its latency SLO)."""


TransferTime = Callable[[int, float | None, int | None, int], float]
"""(segment, prev_width, from_server, to_server) -> seconds to move the request's input."""
