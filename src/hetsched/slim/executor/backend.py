"""The contract between the greedy executor (Algorithm 1) and a device backend.

The executor (:mod:`hetsched.slim.executor.greedy`) is one implementation for both worlds; what
differs is the backend it drives: :mod:`hetsched.slim.sim.simulated_backend` models a device on the
simulated :class:`~hetsched.core.events.EventLoop`, :mod:`hetsched.slim.live.torch_backend` runs
real SlimResNet segments on ``cpu``/``cuda:N``. The executor is single-threaded and event-driven in
both: it reacts to ``submit`` and to batch completions, and it reads time only from the clock it
was given. A live backend runs batches on worker threads and hands each completion back to the
clock's thread (``call_soon_threadsafe``), so the executor's state is never touched concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SegmentKey:
    """The queue key of Algorithm 1 line 3: (segment, requested width, previous width).

    ``prev_width`` is the width the input activation was produced at (segment k's input channels
    follow segment k-1's width); ``1.0`` for segment 0, whose input is the image.
    """

    segment: int
    width: float
    prev_width: float


BatchDone = Callable[[Sequence[Any]], None]
"""Called (on the clock's thread) with one output per input, in input order, when a batch ends."""


class ExecutorBackend(Protocol):
    """What Algorithm 1 needs from one device.

    Instance handles are opaque to the executor: whatever ``load`` returns is passed back to
    ``run_batch`` and ``unload``.
    """

    name: str

    @property
    def memory_bytes(self) -> int:
        """Device memory (VRAM_tot of line 14): the executor's M_max when its config sets none."""

    def instance_bytes(self, segment: int, width: float) -> int:
        """Estimated device bytes of one (segment, width) instance: CANLOAD's estimate (line 14)."""

    def vram_used_bytes(self) -> int:
        """Device memory in use now (live: the device's reading; sim: the model's account)."""

    def utilization_pct(self) -> float | None:
        """The latest utilisation sample in percent, or None before the first (line 17)."""

    def power_w(self) -> float:
        """Current power draw in watts."""

    @property
    def max_power_w(self) -> float:
        """Board power limit, for normalising the router's state."""

    def load(self, segment: int, width: float) -> Any:
        """Loads an instance of (segment, width) onto the device; returns its handle."""

    def unload(self, handle: Any) -> None:
        """Offloads an instance (Algorithm 1 line 25: offload to CPU, free VRAM)."""

    def run_batch(
        self, handle: Any, key: SegmentKey, inputs: Sequence[Any], done: BatchDone
    ) -> None:
        """Starts one batch on ``handle``; returns at once and calls ``done`` when it finishes.

        ``inputs`` are the requests' payloads (activations live; None in simulation). The
        instance may be wider than ``key.width`` (FINDFREEBESTFIT picks the smallest width >=
        the requested one), never narrower.
        """


BATCH_SLOTS_UNBOUNDED = 1 << 62
"""``batch_slots`` of a backend that computes every started batch at once (the simulated device,
a GPU's streams): the executor never holds a batch back for a slot."""


@runtime_checkable
class EnergyReporter(Protocol):
    """Optional for a backend: an energy counter the executor's telemetry reports (the
    simulator's exact integral of its power model; NVML's or RAPL's counter live). Without one,
    the executor reports energy as unavailable rather than guessing."""

    energy_source: str
    """Where the figure comes from (``model``, ``nvml``, ``rapl``, ...): printed beside it."""

    def energy_j(self) -> float:
        """Energy used since the backend was created, in joules."""
