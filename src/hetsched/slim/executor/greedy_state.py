"""What the greedy executor keeps and shows: Algorithm 1's state, read-only views, key checks.

:class:`GreedyState` holds the state of one executor of Algorithm 1 (Slim Scheduler paper): the
per-key request FIFOs and the global arrival order, the free lists of loaded instances, the
counters, and the telemetry record. It answers every read-only question about it (queue lengths,
telemetry for the router's state, energy) and validates a key on its first use (W and M_max).
The algorithm that changes it, LOOP and UNLOADERLOOP, is
:class:`~hetsched.slim.executor.greedy.GreedyExecutor`, its only subclass.
"""

from __future__ import annotations

from collections import deque

from hetsched.core.errors import ConfigError
from hetsched.slim.executor.backend import (
    BATCH_SLOTS_UNBOUNDED,
    EnergyReporter,
    ExecutorBackend,
    SegmentKey,
)
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.queues import Instance, KeyQueue
from hetsched.slim.executor.server import BatchFinished, SchedulingClock, ServerTelemetry
from hetsched.slim.executor.telemetry import ExecutorTelemetry

IMAGE_WIDTH = 1.0
"""The previous width of segment 0's input (the whole image)."""


class GreedyState:
    """Algorithm 1's state on one backend and the read-only views of it.

    Args:
        backend: The device (simulated or live).
        clock: Where time comes from and callbacks are scheduled.
        config: Algorithm 1's knobs.
        name: Server name (default: the backend's).

    Raises:
        ConfigError: If M_max exceeds the device's memory (naming ``vram_cap_bytes``).
    """

    def __init__(
        self,
        backend: ExecutorBackend,
        clock: SchedulingClock,
        config: ExecutorConfig | None = None,
        name: str | None = None,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.config = config = config or ExecutorConfig()
        self.name = name or backend.name
        self.vram_cap_bytes = config.vram_cap_bytes or backend.memory_bytes
        if self.vram_cap_bytes > backend.memory_bytes:
            raise ConfigError(
                f"vram_cap_bytes: M_max {self.vram_cap_bytes} exceeds the memory of"
                f" {backend.name} ({backend.memory_bytes} bytes)"
            )
        self.record = ExecutorTelemetry(config.sample_interval_s)
        """Counters, durations and the sampled series (:mod:`hetsched.slim.executor.telemetry`)."""
        self._max_batch = config.max_batch
        self._scale_queue_threshold = config.scale_queue_threshold
        self._widths = frozenset(config.widths)
        self._queues: dict[tuple[int, float, float], KeyQueue] = {}
        self._order: deque[KeyQueue] = deque()
        """The FIFO's arrival order: the key queue of each waiting request, oldest first."""
        self._queued = 0
        self._queued_by_segment: list[int] = []
        self._free: dict[tuple[int, float], list[Instance]] = {}
        self._blocked: KeyQueue | None = None
        self._loaded: dict[tuple[int, float], int] = {}
        self._instances_loaded = 0
        self._running = 0
        self._unload_at_s: float | None = None
        self._retry_pending = False
        self._memory_blocked = False
        """The last CANLOAD refusal was M_max's (an unload can lift it), not U_blk's."""
        self._paused = False
        self._batch_callbacks: set[BatchFinished] = set()
        """The ``finished`` callbacks of :meth:`submit_many`: called once per batch."""
        self._energy_reporter = backend if isinstance(backend, EnergyReporter) else None
        self._telemetry: ServerTelemetry | None = None
        """The last telemetry, kept while nothing changed it; only for a backend whose readings
        change only when a batch starts or ends (``readings_follow_batches``: the simulated
        device), since a live device's power and utilisation move on their own."""
        self._keep_telemetry = bool(getattr(backend, "readings_follow_batches", False))
        self._batch_slots: int = getattr(backend, "batch_slots", None) or BATCH_SLOTS_UNBOUNDED
        """Batches the device computes at once (a live CPU's compute slots; unbounded otherwise).
        While this many of the executor's batches run, LOOP starts no other (module doc)."""

    # -- read-only state, for telemetry and tests ------------------------------------------------

    @property
    def queue_length(self) -> int:
        """Requests waiting in the FIFO."""
        return self._queued

    def queue_by_segment(self) -> tuple[int, ...]:
        """Requests waiting per segment (0-based index)."""
        return tuple(self._queued_by_segment)

    @property
    def running_batches(self) -> int:
        """Batches running now (one per busy instance)."""
        return self._running

    @property
    def instances_loaded(self) -> int:
        """Instances on the device, busy or free."""
        return self._instances_loaded

    def loaded_instances(self) -> dict[tuple[int, float], int]:
        """Instances loaded per (segment, width)."""
        return {key: count for key, count in self._loaded.items() if count}

    def energy(self) -> tuple[float, str]:
        """(joules since start, source) from the backend's counter; (NaN, ``none``) without one."""
        if self._energy_reporter is None:
            return float("nan"), "none"
        return self._energy_reporter.energy_j(), self._energy_reporter.energy_source

    def telemetry(self) -> ServerTelemetry:
        """Queue length, power and utilisation now (the router's state, eq. 1); read-only."""
        telemetry = self._telemetry
        if telemetry is None:
            backend = self.backend
            telemetry = ServerTelemetry(
                self._queued,
                backend.power_w(),
                backend.max_power_w,
                backend.utilization_pct() or 0.0,
            )
            if self._keep_telemetry:
                self._telemetry = telemetry
        return telemetry

    # -- bookkeeping --------------------------------------------------------------------------

    def _queue(self, segment: int, width: float, prev_width: float | None) -> KeyQueue:
        """The queue of key (segment, width, prev_width), created on the key's first request."""
        key = (segment, width, IMAGE_WIDTH if prev_width is None else prev_width)
        queue = self._queues.get(key)
        return self._new_queue(key) if queue is None else queue

    def _new_queue(self, key: tuple[int, float, float]) -> KeyQueue:
        """First request of a key: validate it against W and M_max once, create its queue."""
        segment, width, prev_width = key
        if width not in self._widths:
            raise ConfigError(f"width {width} is not in the executor's W {self.config.widths}")
        needed_bytes = self.backend.instance_bytes(segment, width)
        if needed_bytes > self.vram_cap_bytes:
            raise ConfigError(
                f"vram_cap_bytes: M_max {self.vram_cap_bytes} is smaller than one instance of"
                f" segment {segment + 1} at width {width} ({needed_bytes} bytes)"
            )
        while len(self._queued_by_segment) <= segment:
            self._queued_by_segment.append(0)
        for candidate in self.config.widths:
            self._free.setdefault((segment, candidate), [])
            self._loaded.setdefault((segment, candidate), 0)
        exact = self.config.exact_width
        fitting = tuple(
            self._free[(segment, candidate)]
            for candidate in self.config.widths
            if candidate == width or (candidate > width and not exact)
        )
        queue = self._queues[key] = KeyQueue(SegmentKey(segment, width, prev_width), fitting)
        return queue
