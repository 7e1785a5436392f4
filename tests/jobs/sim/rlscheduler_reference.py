"""A test oracle: RLScheduler's scheduling loop (Zhang et al., SC'20, ``HPCSimPickJobs``),
restated procedurally for a pool of identical processors, independent of the simulator.

The loop picks the best-ranked waiting job; if it does not fit it stays picked while the clock
moves one event at a time (the next arrival if it comes no later than the next completion, else
that completion), and with backfilling every step first starts, in submission order, each
waiting job that fits now and whose estimated end is strictly before the picked job's shadow
time (computed once, when it first blocks). Once the pick starts, the next pick is made at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Key = Callable[[int], object]


def rlscheduler_keys(submit_s: np.ndarray, requested_s: np.ndarray, procs: np.ndarray):
    """RLScheduler's FCFS, SJF and F1 ranking keys (smaller first)."""

    def f1(j: int) -> float:
        rt, st = requested_s[j], submit_s[j]
        return math.log10(rt if rt > 0 else 0.1) * procs[j] + 870 * math.log10(
            st if st > 0 else 0.1
        )

    return {
        "fcfs": lambda j: submit_s[j],
        "sjf": lambda j: (requested_s[j], submit_s[j]),
        "f1": f1,
    }


def rlscheduler_starts(
    submit_s: np.ndarray,
    run_s: np.ndarray,
    requested_s: np.ndarray,
    procs: np.ndarray,
    total_procs: int,
    key: Key,
    backfill: bool,
) -> np.ndarray:
    """Start time of every job (jobs sorted by submission) under RLScheduler's loop."""
    n = len(submit_s)
    start = np.full(n, np.nan)
    clock = {"now": float(submit_s[0]), "free": total_procs, "next": 1}
    queue: list[int] = [0]
    running: list[int] = []

    def step() -> None:
        """One event: the next arrival if no later than the next completion, else that."""
        running.sort(key=lambda j: start[j] + run_s[j])
        release_s = start[running[0]] + run_s[running[0]] if running else math.inf
        nxt = clock["next"]
        if nxt < n and submit_s[nxt] <= release_s:
            clock["now"] = max(clock["now"], float(submit_s[nxt]))
            queue.append(nxt)
            clock["next"] = nxt + 1
        else:
            clock["now"] = max(clock["now"], float(release_s))
            clock["free"] += int(procs[running.pop(0)])

    def begin(j: int) -> None:
        start[j] = clock["now"]
        clock["free"] -= int(procs[j])
        running.append(j)
        queue.remove(j)

    while True:
        queue.sort(key=key)
        head = queue[0]
        if procs[head] > clock["free"]:
            shadow_s = _shadow(running, start, requested_s, procs, clock["free"], procs[head])
            while procs[head] > clock["free"]:
                if backfill:
                    for j in sorted(queue, key=lambda j: submit_s[j]):
                        fits = procs[j] <= clock["free"]
                        if fits and clock["now"] + requested_s[j] < shadow_s:
                            begin(j)
                step()
        begin(head)
        if not queue:
            if clock["next"] >= n:
                return start
            while not queue:
                step()


def _shadow(running, start, requested_s, procs, free: int, need: int) -> float:
    """When enough processors are free for ``need``, by the running jobs' estimated ends."""
    shadow_s = -math.inf
    for j in sorted(running, key=lambda j: start[j] + requested_s[j]):
        free += int(procs[j])
        shadow_s = start[j] + requested_s[j]
        if free >= need:
            break
    return shadow_s
