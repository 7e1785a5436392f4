"""Background contention on an emulated node: busy-loop processes at a duty cycle.

One process per node core, pinned to it, busy for ``duty`` of every :data:`CONTENTION_PERIOD_S`
period. The loop is busy by wall clock, so a preempted loop gets less CPU than ``duty``;
:func:`achieved_duty` of :meth:`Contention.cpu_seconds` says what it really got.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

from hetsched.core.errors import DataError

CONTENTION_PERIOD_S = 0.01


def achieved_duty(cpu_s: float, processes: int, wall_s: float) -> float:
    """CPU seconds per wall second per busy-loop process: the duty the contention really got."""
    if processes < 1 or wall_s <= 0:
        raise DataError(f"need processes >= 1 and a positive window, got {processes}, {wall_s}")
    return cpu_s / (processes * wall_s)


def ignore_ctrl_c() -> None:
    """Child processes leave Ctrl-C to the parent, which stops them.

    Otherwise a busy loop interrupted inside ``stop.is_set()`` dies holding the event's lock, and
    the parent's ``stop.set()`` then waits for that lock forever.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _busy_loop(cores: tuple[int, ...], duty: float, stop) -> None:
    ignore_ctrl_c()
    os.sched_setaffinity(0, cores)
    busy_s = duty * CONTENTION_PERIOD_S
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < busy_s:
            pass
        time.sleep(max(CONTENTION_PERIOD_S - busy_s, 0.0))


class Contention:
    """Context manager running one busy-loop process per node core at the given duty cycle.

    The loop is busy by wall clock, so a preempted loop gets less CPU than ``duty``;
    :meth:`cpu_seconds` lets the caller check what it really consumed.
    """

    def __init__(self, cores: tuple[int, ...], duty: float) -> None:
        self.cores, self.duty = cores, duty
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list = []

    def __enter__(self) -> Contention:
        if self.duty > 0:
            for core in self.cores:
                proc = self._ctx.Process(target=_busy_loop, args=((core,), self.duty, self._stop))
                proc.start()
                self._procs.append(proc)
        return self

    @property
    def processes(self) -> int:
        return len(self._procs)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds consumed so far by the busy-loop processes."""
        import psutil

        total = 0.0
        for proc in self._procs:
            times = psutil.Process(proc.pid).cpu_times()
            total += times.user + times.system
        return total

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
