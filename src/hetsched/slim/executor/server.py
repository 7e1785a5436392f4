"""What a segment server offers the cluster, and the clock it runs on.

The cluster (:mod:`hetsched.slim.cluster.slim_cluster`) sees each server only through
:class:`SegmentServer`; the greedy executor is the one implementation, in both worlds. Defined
here, below the cluster, so the executor does not depend on the cluster that drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(slots=True)
class ServerTelemetry:
    """The latest telemetry of one server (what the router's state is built from); read-only
    (slotted rather than frozen: built once per server per routing decision)."""

    queue_length: int
    power_w: float
    max_power_w: float
    utilization_pct: float


SegmentDone = Callable[[float], None]
"""Called by a server when a submitted segment finished, with the width it actually ran."""
SegmentOutputDone = Callable[[float, Any], None]
"""Called instead when the request carried a payload: the width it ran and the segment's output."""
BatchFinished = Callable[[float, list[Any]], None]
"""Called once per finished batch for the requests of :meth:`SegmentServer.submit_many` in it:
the width it ran and their outputs, in submission order (a simulated backend's outputs are its
inputs, so a simulation passes its request records as payloads and gets them back)."""


class SegmentServer(Protocol):
    """What the cluster needs from one server (an executor on a backend)."""

    name: str

    def submit(
        self,
        segment: int,
        width: float,
        prev_width: float | None,
        done: SegmentDone | SegmentOutputDone,
        payload: Any = None,
    ) -> None:
        """Enqueues one segment request (key (segment, width, prev_width)); ``done`` on finish.

        Without a payload (simulation) ``done(executed_width)``; with one (the activation, live)
        ``done(executed_width, output)``. Callers pass ``payload`` only when they have one.
        """

    def submit_many(
        self,
        segment: int,
        width: float,
        prev_width: float | None,
        payloads: list[Any],
        finished: BatchFinished,
    ) -> None:
        """Enqueues one request of key (segment, width, prev_width) per payload, as if each were
        submitted in turn; ``finished`` reports them per batch instead of one call per request
        (the simulator's fast path)."""

    def telemetry(self) -> ServerTelemetry:
        """Current queue length, power and utilisation."""

    def energy(self) -> tuple[float, str]:
        """(joules used since start, where the figure comes from); NaN and ``none`` without a
        counter."""


class SchedulingClock(Protocol):
    """The executor's view of time: read it and schedule callbacks on it."""

    def now_s(self) -> float: ...

    def schedule_in(self, delay_s: float, callback: Callable[[], None]) -> object: ...
