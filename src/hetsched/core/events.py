"""The simulation clock: one discrete-event loop shared by every simulator in hetsched.

Events live in a heap of ``(time_s, priority, sequence, callback)``. The sequence number makes ties
deterministic: two events at the same time and priority run in the order they were scheduled, so a
simulation is reproducible per seed (the SimPy approach). Policies read time through the
:class:`Clock` protocol, never from the wall clock, so the same code runs simulated and live.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current time in seconds."""

    def now_s(self) -> float:
        """Current time in seconds."""
        ...


class WallClock:
    """Monotonic wall clock for live backends, starting at zero when created."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now_s(self) -> float:
        """Seconds since this clock was created."""
        return time.monotonic() - self._t0


@dataclass(order=True)
class _Event:
    time_s: float
    priority: int
    sequence: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class EventHandle:
    """Returned by :meth:`EventLoop.schedule`; lets the caller cancel the event."""

    __slots__ = ("_event",)

    def __init__(self, event: _Event) -> None:
        self._event = event

    @property
    def time_s(self) -> float:
        """When the event fires."""
        return self._event.time_s

    def cancel(self) -> None:
        """Cancels the event; cancelling twice or after it ran is harmless."""
        self._event.cancelled = True


class EventLoop:
    """A deterministic discrete-event loop; also a :class:`Clock`.

    Args:
        start_s: Initial simulated time.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s
        self._heap: list[_Event] = []
        self._sequence = itertools.count()
        self.events_processed = 0

    def now_s(self) -> float:
        """Current simulated time in seconds."""
        return self._now_s

    def schedule(self, at_s: float, callback: Callable[[], None], priority: int = 0) -> EventHandle:
        """Schedules ``callback`` at absolute time ``at_s``.

        Lower ``priority`` runs first among events at the same time; equal priorities run in
        scheduling order.

        Raises:
            ValueError: If ``at_s`` is in the past or not finite.
        """
        if not math.isfinite(at_s):
            raise ValueError(f"event time must be finite, got {at_s}")
        if at_s < self._now_s:
            raise ValueError(f"cannot schedule at {at_s} s, before now ({self._now_s} s)")
        event = _Event(at_s, priority, next(self._sequence), callback)
        heapq.heappush(self._heap, event)
        return EventHandle(event)

    def schedule_in(
        self, delay_s: float, callback: Callable[[], None], priority: int = 0
    ) -> EventHandle:
        """Schedules ``callback`` after ``delay_s`` seconds (must be >= 0)."""
        if delay_s < 0:
            raise ValueError(f"delay must be >= 0, got {delay_s}")
        return self.schedule(self._now_s + delay_s, callback, priority)

    @property
    def pending(self) -> int:
        """Number of scheduled events not yet run (cancelled ones included until popped)."""
        return len(self._heap)

    def peek_time_s(self) -> float | None:
        """Time of the next live event, or None if there is none."""
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].time_s if self._heap else None

    def step(self) -> bool:
        """Runs the next live event. Returns False when no event is left."""
        while self._heap:
            event = heapq.heappop(self._heap)
            if event.cancelled:
                continue
            self._now_s = event.time_s
            event.callback()
            self.events_processed += 1
            return True
        return False

    def run(self, until_s: float | None = None, max_events: int | None = None) -> int:
        """Runs events until none is left, the next is after ``until_s``, or ``max_events`` ran.

        When stopped by ``until_s`` the clock advances to ``until_s``.

        Returns:
            The number of events run by this call.
        """
        ran = 0
        while max_events is None or ran < max_events:
            next_s = self.peek_time_s()
            if next_s is None or (until_s is not None and next_s > until_s):
                break
            self.step()
            ran += 1
        if (
            until_s is not None
            and until_s > self._now_s
            and (max_events is None or ran < max_events)
        ):
            self._now_s = until_s
        return ran
