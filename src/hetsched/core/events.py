"""The simulation clock: one discrete-event loop shared by every simulator in hetsched.

An event is ``[time_s, priority, sequence, callback]`` in a heap. The sequence number makes ties
deterministic: two events at the same time and priority run in the order they were scheduled, so a
simulation is reproducible per seed (the SimPy approach). Policies read time through the
:class:`Clock` protocol, never from the wall clock, so the same code runs simulated and live.

Events are plain lists rather than objects with a Python ``__lt__`` because the heap then
compares them in C (time, priority, then the unique sequence number, so callbacks are never
compared): with an ordered dataclass the comparisons were most of an event's cost, and a
simulated batch costs one event. A cancelled event keeps its place with ``None`` as callback.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Protocol

_TIME, _CALLBACK = 0, 3
"""Positions in an event list (priority and sequence, 1 and 2, only order the heap)."""


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


class _Event(list):
    """An event with named fields, for loops that read them by name (the real-time loop).

    The same layout as the :class:`EventLoop`'s lists, so an :class:`EventHandle` cancels either.
    """

    __slots__ = ()

    def __init__(
        self, time_s: float, priority: int, sequence: int, callback: Callable[[], None]
    ) -> None:
        super().__init__((time_s, priority, sequence, callback))

    @property
    def time_s(self) -> float:
        """When the event fires."""
        return self[_TIME]

    @property
    def callback(self) -> Callable[[], None]:
        """What runs then (None once cancelled)."""
        return self[_CALLBACK]

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`EventHandle.cancel` was called."""
        return self[_CALLBACK] is None


class EventHandle:
    """Returned by :meth:`EventLoop.schedule`; lets the caller cancel the event."""

    __slots__ = ("_event",)

    def __init__(self, event: list) -> None:
        self._event = event

    @property
    def time_s(self) -> float:
        """When the event fires."""
        return self._event[_TIME]

    def cancel(self) -> None:
        """Cancels the event; cancelling twice or after it ran is harmless."""
        self._event[_CALLBACK] = None


class EventLoop:
    """A deterministic discrete-event loop; also a :class:`Clock`.

    Args:
        start_s: Initial simulated time.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s
        self._heap: list[list] = []
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
        if not self._now_s <= at_s < math.inf:  # one test on the hot path; NaN fails it too
            if not math.isfinite(at_s):
                raise ValueError(f"event time must be finite, got {at_s}")
            raise ValueError(f"cannot schedule at {at_s} s, before now ({self._now_s} s)")
        event = [at_s, priority, next(self._sequence), callback]
        heappush(self._heap, event)
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
        heap = self._heap
        while heap and heap[0][_CALLBACK] is None:
            heappop(heap)
        return heap[0][_TIME] if heap else None

    def step(self) -> bool:
        """Runs the next live event. Returns False when no event is left."""
        heap = self._heap
        while heap:
            at_s, _, _, callback = heappop(heap)
            if callback is None:
                continue
            self._now_s = at_s
            callback()
            self.events_processed += 1
            return True
        return False

    def run(self, until_s: float | None = None, max_events: int | None = None) -> int:
        """Runs events until none is left, the next is after ``until_s``, or ``max_events`` ran.

        When stopped by ``until_s`` the clock advances to ``until_s``.

        Returns:
            The number of events run by this call.
        """
        # The simulators' inner loop (``replay`` calls it once per arrival): step() inlined.
        heap = self._heap
        last_s = math.inf if until_s is None else until_s
        budget = math.inf if max_events is None else max_events
        ran = 0
        while ran < budget and heap and heap[0][_TIME] <= last_s:
            at_s, _, _, callback = heappop(heap)
            if callback is None:
                continue
            self._now_s = at_s
            callback()
            self.events_processed += 1
            ran += 1
        if until_s is not None and until_s > self._now_s and ran < budget:
            self._now_s = until_s
        return ran
