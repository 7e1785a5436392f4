"""How busy the live backend keeps its device, and how many batches the CPU computes at once.

:class:`BusyShare` is the utilisation reading of a device that has none of its own for this
backend's work (the CPU; a GPU NVML cannot read); :func:`cpu_compute_slots` bounds concurrent
CPU batches so that their OpenMP teams do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

import torch

CPU_BUSY_WINDOW_S = 0.1
"""The CPU's busy-share window: as long as the interval of a CPU-time reading (clock ticks are
10 ms), short enough that the executor's utilisation block lifts soon after its batches stop."""


def cpu_compute_slots() -> int:
    """How many CPU batches may compute at once without oversubscribing this process's cores.

    Each batch already spreads over ``torch.get_num_threads()`` OpenMP threads, and every worker
    thread that calls into torch gets a team of its own. Two batches at once on cores that one
    team fills put more threads than cores into parallel regions whose barriers wait for the
    slowest thread: a descheduled team member stalls the whole team for a time slice, at every
    operator. Measured on 2 cores with 2 torch threads (benchmarks/bench_live_executor.py), 32
    concurrent workers cost 20-25 % more CPU per image than the plain loop, and some rounds ran
    at a quarter of its throughput.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, torch.get_num_threads()))


class BusyShare:
    """Share of the last ``window_s`` seconds the backend's compute slots were running batches.

    The utilisation of a device that has no reading of its own for this backend's work: a GPU
    that NVML cannot read (e.g. a ROCm device), and the CPU, where the process's CPU share would
    count the loop's own work and lag behind by its read interval. A reading is taken at every
    call (no cached value), so once the batches stop it falls below U_blk within a few ms: a
    head that waits on CANLOAD while this backend's own batches kept the device busy is not
    held back by a stale reading (each such wait cost up to a read interval of an idle device).

    Args:
        window_s: The sliding window.
        slots: Batches that make the device fully busy (two at once on one slot count once).
    """

    source = "busy-share"

    def __init__(self, window_s: float = 1.0, slots: int = 1) -> None:
        self.window_s = window_s
        self.slots = slots
        self._spans: deque[tuple[float, float, float]] = deque()
        """(begin, end, busy fraction) of the past, oldest first."""
        self._running = 0
        self._since_s = time.monotonic()
        self._lock = threading.Lock()

    def _share(self) -> float:
        return min(self._running, self.slots) / self.slots

    def _change(self, delta: int) -> None:
        with self._lock:
            now_s = time.monotonic()
            if self._running:
                self._spans.append((self._since_s, now_s, self._share()))
            self._running += delta
            self._since_s = now_s

    def started(self) -> None:
        self._change(+1)

    def finished(self) -> None:
        self._change(-1)

    def utilization_pct(self) -> float | None:
        now_s = time.monotonic()
        start_s = now_s - self.window_s
        with self._lock:
            while self._spans and self._spans[0][1] < start_s:
                self._spans.popleft()
            spans = list(self._spans)
            if self._running:
                spans.append((self._since_s, now_s, self._share()))
        busy_s = sum((end - max(begin, start_s)) * share for begin, end, share in spans)
        return 100.0 * min(busy_s / self.window_s, 1.0)
