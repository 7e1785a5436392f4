"""The live clock: a real-time event loop with the interface of the simulated
:class:`~hetsched.core.events.EventLoop`, so the greedy executor (Algorithm 1) runs unchanged
against real devices.

The executor is single-threaded and event-driven: it reads ``now_s()`` and asks for callbacks with
``schedule``/``schedule_in``. Here time is the monotonic wall clock (zero when the loop is made),
and every callback runs on the one thread that drives the loop, so the executor needs no locks.
Other threads (a backend's workers finishing a batch, a workload generator) hand work to that
thread with :meth:`RealTimeLoop.call_soon_threadsafe`.

Code written against ``EventLoop.step()`` (the Slim cluster's ``next_state``) runs here too:
:meth:`RealTimeLoop.step` runs the next callback once it falls due. A batch on a worker thread
is not in the heap until it hands back, so the code that starts one wraps its ``done`` with
:meth:`RealTimeLoop.expect`; ``step`` then waits for the hand-off instead of reporting an empty
loop.

Ties are ordered as in ``EventLoop``: by time, then priority, then scheduling order (the heap holds
``(time_s, priority, sequence)``). An event whose time has already passed when it is scheduled
runs as soon as the loop gets to it, in that same order; it is not an error, because wall time
moves between computing a time and scheduling it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Callable

from hetsched.core.events import EventHandle, _Event


class RealTimeLoop:
    """A wall-clock event loop; also a :class:`~hetsched.core.events.Clock`.

    Drive it either on the calling thread with :meth:`run_until`, or on a background thread with
    :meth:`start` and :meth:`stop`. An exception raised by a callback ends the loop: ``run_until``
    re-raises it at once; in background mode ``stop`` (or :meth:`join`) re-raises it.
    """

    def __init__(self) -> None:
        self._t0_s = time.monotonic()
        self._heap: list[_Event] = []
        self._sequence = itertools.count()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._expected = 0
        """Hand-offs announced with :meth:`expect` that have not run yet."""
        self.events_processed = 0

    def now_s(self) -> float:
        """Seconds since the loop was created (monotonic)."""
        return time.monotonic() - self._t0_s

    def schedule(self, at_s: float, callback: Callable[[], None], priority: int = 0) -> EventHandle:
        """Schedules ``callback`` at loop time ``at_s``; safe from any thread.

        Lower ``priority`` runs first among events at the same time; equal priorities run in
        scheduling order.

        Raises:
            ValueError: If ``at_s`` is not finite.
        """
        if not math.isfinite(at_s):
            raise ValueError(f"event time must be finite, got {at_s}")
        with self._cond:
            event = _Event(at_s, priority, next(self._sequence), callback)
            heapq.heappush(self._heap, event)
            self._cond.notify()
        return EventHandle(event)

    def schedule_in(
        self, delay_s: float, callback: Callable[[], None], priority: int = 0
    ) -> EventHandle:
        """Schedules ``callback`` ``delay_s`` seconds from now.

        A negative delay means a moment already past (a caller computed ``at_s - now_s()`` and
        the wall clock moved on before this call): it runs as soon as possible.
        """
        return self.schedule(self.now_s() + delay_s, callback, priority)

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> EventHandle:
        """Runs ``callback`` on the loop's thread as soon as possible (how workers hand back)."""
        return self.schedule(self.now_s(), callback)

    def expect(self, callback: Callable[..., None]) -> Callable[..., None]:
        """Announces that another thread will post ``callback`` back (e.g. a batch's ``done``).

        Until the returned wrapper has run, :meth:`step` waits for it rather than return False
        on an empty heap: the wall clock, unlike the simulated one, has work in flight that is
        in no heap yet.
        """
        with self._cond:
            self._expected += 1

        def arrived(*args: object) -> None:
            with self._cond:
                self._expected -= 1
            callback(*args)

        return arrived

    def step(self) -> bool:
        """Runs the next callback on this thread: ``EventLoop.step`` on the wall clock.

        It waits until the earliest event falls due, or until another thread posts one. It runs
        at most one callback.

        Returns:
            False only when nothing is scheduled and no :meth:`expect`-ed hand-off is
            outstanding (or :meth:`stop` was called); True after running a callback.

        Raises:
            RuntimeError: If the loop already runs on a background thread.
        """
        if self._thread is not None:
            raise RuntimeError("the loop runs on a background thread; use stop() instead")
        event = self._next_due(None, idle_ends=True)
        if event is None:
            return False
        event.callback()
        self.events_processed += 1
        return True

    @property
    def pending(self) -> int:
        """Number of scheduled events not yet run (cancelled ones included until popped)."""
        with self._cond:
            return len(self._heap)

    def run_until(self, predicate: Callable[[], bool], timeout_s: float | None = None) -> bool:
        """Runs callbacks on this thread until ``predicate()`` holds, ``timeout_s`` passes or
        :meth:`stop` is called.

        The predicate is checked before the first callback and after each one, on this thread,
        so it may read the executor's state.

        Returns:
            Whether the predicate held.

        Raises:
            RuntimeError: If the loop already runs on a background thread.
        """
        if self._thread is not None:
            raise RuntimeError("the loop runs on a background thread; use stop() instead")
        deadline_s = None if timeout_s is None else self.now_s() + timeout_s
        with self._cond:
            self._stopping = False
        return self._run(predicate, deadline_s)

    def start(self) -> None:
        """Runs the loop on a background thread until :meth:`stop`.

        Raises:
            RuntimeError: If it already runs.
        """
        if self._thread is not None:
            raise RuntimeError("the loop is already running on a background thread")
        with self._cond:
            self._stopping = False
        self._thread = threading.Thread(target=self._background, name="realtime-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the loop after the callback now running; joins the background thread if any.

        Raises:
            BaseException: The exception a callback raised on the background thread, if any.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self.join()

    def join(self, timeout_s: float | None = None) -> None:
        """Waits for the background thread to end; re-raises a callback's exception."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if not thread.is_alive():
                self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _background(self) -> None:
        try:
            self._run(lambda: False, None)
        except BaseException as error:  # handed to the thread that calls stop()/join()
            self._error = error

    def _run(self, predicate: Callable[[], bool], deadline_s: float | None) -> bool:
        while True:
            if predicate():
                return True
            event = self._next_due(deadline_s)
            if event is None:
                return False
            event.callback()
            self.events_processed += 1

    def _next_due(self, deadline_s: float | None, *, idle_ends: bool = False) -> _Event | None:
        """Waits for the earliest live event to fall due; None on stop, at the deadline, or (with
        ``idle_ends``) when nothing is scheduled and no expected hand-off is outstanding."""
        with self._cond:
            while not self._stopping:
                while self._heap and self._heap[0].cancelled:
                    heapq.heappop(self._heap)
                if idle_ends and not self._heap and self._expected == 0:
                    return None
                now_s = self.now_s()
                if self._heap and self._heap[0].time_s <= now_s:
                    return heapq.heappop(self._heap)
                if deadline_s is not None and now_s >= deadline_s:
                    return None
                waits_s = [
                    t - now_s
                    for t in (self._heap[0].time_s if self._heap else None, deadline_s)
                    if t is not None
                ]
                self._cond.wait(min(waits_s) if waits_s else None)
            return None
