"""Seeded workloads: arrival processes at rate r, and streams of segment requests for one server.

The same generator drives the simulated cluster (image arrivals), ``hetsched slim run-server
--sim`` and the live server: arrival times are drawn up front from one seed, so a workload is
identical wherever it runs. :func:`drive` plays it on any clock with ``now_s`` and
``schedule_in`` (one pending event at a time, so the event heap stays small); :func:`replay` is
the simulator's fast path, which advances an :class:`~hetsched.core.events.EventLoop` to each
arrival instead of scheduling one event per request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

Pattern = Literal["poisson", "bursty", "diurnal"]

BURST_RATE_FACTOR = 3.0
"""Bursty arrivals: the rate during an ON period, as a multiple of the mean rate r (the paper's
default; scenarios may ask for more)."""
DIURNAL_PERIOD_S = 60.0
"""Diurnal arrivals: default period of the rate's cycle."""
DIURNAL_AMPLITUDE = 0.5
"""Diurnal arrivals: default relative swing of the rate around r."""


def arrival_times_s(
    rng: np.random.Generator,
    rate_per_s: float,
    pattern: Pattern,
    *,
    count: int | None = None,
    duration_s: float | None = None,
    burst_s: float = 0.25,
    burst_factor: float = BURST_RATE_FACTOR,
    period_s: float = DIURNAL_PERIOD_S,
    amplitude: float = DIURNAL_AMPLITUDE,
    start_s: float = 0.0,
) -> np.ndarray:
    """Sorted arrival times at mean rate r: ``count`` of them, or all before ``duration_s``.

    The process starts at ``start_s`` (a bursty one with an ON period; a diurnal one at the
    point of its cycle that time is on), and ``duration_s`` counts from there.

    * ``poisson``: exponential gaps.
    * ``bursty`` (on/off, an MMPP with a silent state): ON periods (exponential, mean
      ``burst_s``) at ``burst_factor`` times the mean rate alternate with silent OFF periods
      ``burst_factor - 1`` times as long on average, so the long-run rate stays r.
    * ``diurnal``: a Poisson process whose rate follows ``r (1 - a cos(2 pi t / period_s))``: it
      ramps from a trough of ``r (1 - a)`` at t = 0 to a peak of ``r (1 + a)`` half a period later
      and back (drawn by thinning a Poisson process at the peak rate); its mean over whole
      periods is r.

    Raises:
        ValueError: Unless exactly one of ``count`` and ``duration_s`` is given, for an unknown
            pattern, a burst factor below 1 or an amplitude outside [0, 1).
    """
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if pattern not in ("poisson", "bursty", "diurnal"):
        raise ValueError(f"unknown arrival pattern {pattern!r}; known: poisson, bursty, diurnal")
    if burst_factor < 1.0 or not 0.0 <= amplitude < 1.0:
        raise ValueError(f"need burst_factor >= 1 and 0 <= amplitude < 1, got {burst_factor}")
    end_s = float("inf") if duration_s is None else duration_s  # finite when count is None
    limit = count if count is not None else int(rng.poisson(rate_per_s * end_s))
    if pattern == "poisson":
        if count is not None:
            return start_s + np.cumsum(rng.exponential(1.0 / rate_per_s, count))
        # Given their number, Poisson arrivals in [0, T) are uniform order statistics.
        return start_s + np.sort(rng.uniform(0.0, end_s, limit))
    if pattern == "diurnal":
        return _diurnal(rng, rate_per_s, period_s, amplitude, count, start_s, start_s + end_s)
    chunks: list[np.ndarray] = []
    drawn, now_s = 0, 0.0
    while drawn < limit if count is not None else now_s < end_s:
        on_s = rng.exponential(burst_s)
        size = rng.poisson(burst_factor * rate_per_s * on_s)
        burst = np.sort(now_s + rng.uniform(0.0, on_s, size))
        chunks.append(burst)
        drawn += len(burst)
        now_s += on_s + rng.exponential((burst_factor - 1.0) * burst_s)
    times = np.concatenate(chunks) if chunks else np.empty(0)
    return start_s + (times[:count] if count is not None else times[times < end_s])


def _diurnal(
    rng: np.random.Generator,
    rate_per_s: float,
    period_s: float,
    amplitude: float,
    count: int | None,
    start_s: float,
    end_s: float,
) -> np.ndarray:
    """The ``diurnal`` pattern of :func:`arrival_times_s` from ``start_s`` on, by thinning (Lewis
    and Shedler)."""
    peak_per_s = rate_per_s * (1.0 + amplitude)
    chunk = max(64, int(peak_per_s * period_s / 8))
    kept: list[np.ndarray] = []
    drawn, now_s = 0, start_s
    while drawn < count if count is not None else now_s < end_s:
        candidates = now_s + np.cumsum(rng.exponential(1.0 / peak_per_s, chunk))
        rate = rate_per_s * (1.0 - amplitude * np.cos(2.0 * np.pi * candidates / period_s))
        accepted = candidates[rng.random(chunk) * peak_per_s < rate]
        kept.append(accepted)
        drawn += len(accepted)
        now_s = float(candidates[-1])
    times = np.concatenate(kept)
    return times[:count] if count is not None else times[times < end_s]


@dataclass(frozen=True)
class SegmentWorkload:
    """A stream of segment requests for one server (columns of equal length, by arrival)."""

    arrival_s: np.ndarray
    segment: np.ndarray
    width: np.ndarray
    prev_width: np.ndarray
    """1.0 for segment 0 (its input is the image)."""

    def __len__(self) -> int:
        return len(self.arrival_s)


def segment_workload(
    seed: int,
    rate_per_s: float,
    pattern: Pattern,
    duration_s: float,
    widths: Sequence[float],
    num_segments: int = 4,
) -> SegmentWorkload:
    """Segment requests arriving at rate r for ``duration_s``: segment and widths uniform."""
    rng = np.random.default_rng(seed)
    arrivals = arrival_times_s(rng, rate_per_s, pattern, duration_s=duration_s)
    n = len(arrivals)
    choices = np.asarray(sorted(widths), dtype=float)
    segment = rng.integers(0, num_segments, n)
    width = choices[rng.integers(0, len(choices), n)]
    prev_width = np.where(segment == 0, 1.0, choices[rng.integers(0, len(choices), n)])
    return SegmentWorkload(arrivals, segment, width, prev_width)


class Submitter(Protocol):
    """What :func:`drive` feeds: a server's ``submit(segment, width, prev_width, done)``."""

    def submit(
        self, segment: int, width: float, prev_width: float | None, done: Callable[[float], None]
    ) -> None: ...


def drive(
    workload: SegmentWorkload, server: Submitter, clock, done: Callable[[float], None]
) -> None:
    """Submits each request of ``workload`` at its arrival time (relative to now) on ``clock``.

    One arrival event is pending at a time: each arrival schedules the next.
    """
    start_s = clock.now_s()
    arrivals = workload.arrival_s.tolist()
    segments = workload.segment.tolist()
    widths = workload.width.tolist()
    prev_widths = workload.prev_width.tolist()
    count = len(arrivals)
    position = 0

    def arrive() -> None:
        nonlocal position
        now_s = clock.now_s()
        # The request this event was scheduled for, then any others due by now (equal times).
        server.submit(segments[position], widths[position], prev_widths[position], done)
        position += 1
        while position < count and start_s + arrivals[position] <= now_s:
            server.submit(segments[position], widths[position], prev_widths[position], done)
            position += 1
        if position < count:
            clock.schedule_in(max(0.0, start_s + arrivals[position] - now_s), arrive)

    if count:
        clock.schedule_in(arrivals[0], arrive)


def replay(
    workload: SegmentWorkload, server: Submitter, loop, done: Callable[[float], None]
) -> None:
    """Runs ``loop`` (an :class:`~hetsched.core.events.EventLoop`) up to each arrival and submits
    the request there; returns after the last arrival (the caller runs the rest).

    Events due at an arrival's time run before it. No event per arrival: the fast path for
    simulations.
    """
    start_s = loop.now_s()
    run, submit = loop.run, server.submit
    columns = (
        workload.arrival_s.tolist(),
        workload.segment.tolist(),
        workload.width.tolist(),
        workload.prev_width.tolist(),
    )
    for at_s, segment, width, prev_width in zip(*columns, strict=True):
        run(start_s + at_s)  # until_s, positional: this runs once per request
        submit(segment, width, prev_width, done)


def window_bounds(arrival_times_s: Sequence[float], warmup_fraction: float) -> tuple[float, float]:
    """(start, end) of a run's steady-state window: after the warm-up (``warmup_fraction`` of
    the arrival span), up to the last arrival. The evaluation and the learned router's validation
    measure on the same window."""
    first_s, last_s = arrival_times_s[0], arrival_times_s[-1]
    return first_s + warmup_fraction * (last_s - first_s), last_s
