"""A simulated device for the greedy executor: batches on the event loop, no real compute.

Contention model (the paper's Figs 1-3: latency and power near-linear in utilisation up to about
90-95 %, sharply non-linear beyond):

* A batch of ``n`` images of (segment, width, previous width) has work ``W = n x FLOPs/image`` and
  memory traffic ``M`` = the instance's weights + the batch's input and output activations (all
  from :class:`~hetsched.slim.model.costs.SegmentCostTable`). Alone on the device it would take
  ``t_alone = launch + W / C + M / B`` with ``C`` the achieved FLOP/s and ``B`` the memory
  bandwidth of the :class:`~hetsched.core.devices.DeviceSpec`.
* Its **utilisation share** is ``u_b = (W / C) / t_alone``: the fraction of its time the device's
  compute is busy (launches and memory stalls leave it idle). Larger batches and wider segments
  have larger shares (Fig. 1). The device's load ``U`` is the sum of the shares of the running
  batches; the utilisation it reports is ``min(U, 1)``.
* A batch starting at load ``U`` (its own share included) gets ``C / s(U)`` of the compute, where
  ``s(U) = (1 + λ·min(U, 1)) · (1 + μ·e(U)²) · max(1, U)`` and ``e(U)`` is how far ``min(U, 1)``
  lies between the knee ``κ`` (``spec.knee_utilization``) and 1, clipped to [0, 1]. Below the knee
  the slowdown is the mild linear interference ``λ`` (shared caches and memory); between the knee
  and full load it rises quadratically to ``(1 + λ)(1 + μ)``; an over-subscribed device
  (``U > 1``) is processor-shared, so latency keeps growing while utilisation is pinned at 100 %
  (the vertical wall of Fig. 3). Latency = ``launch + (W / C)·s(U) + M / B``.
* A batch's share of the compute is fixed when it starts; batches that start or end later do not
  re-time it. That keeps one event per batch (fast and deterministic); under steady load it
  approximates processor sharing.
* **Power** = ``idle + (max − idle)·(a·u + (1 − a)·e(u)²)`` with ``u = min(U, 1)``: linear up to
  the knee, then steeply up to the board limit at full load (Fig. 2). Energy is its exact
  integral over time (power only changes when a batch starts or ends).
* **VRAM** = the weights of the loaded instances + the activations of the running batches.
  Loading an instance copies its weights at ``spec.host_to_device_bytes_per_s``; the copy delays
  the instance's first batch.

The backend has no random source: a seeded workload gives identical results on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from hetsched.core.devices import DeviceSpec
from hetsched.slim.executor.backend import BatchDone, SegmentKey
from hetsched.slim.model.costs import SegmentCostTable

LINEAR_INTERFERENCE = 0.15
"""λ: slowdown per unit of load below the knee (co-running batches share caches and DRAM)."""
KNEE_SLOWDOWN = 1.0
"""μ: extra slowdown between the knee and full load (Fig. 3's upturn)."""
POWER_LINEAR_SHARE = 0.8
"""a: share of the idle-to-max power range reached linearly by the knee region."""

_BatchKey = tuple[int, float, float, int]
"""(segment, instance width, previous width, batch size)."""


def batch_cost(
    spec: DeviceSpec,
    costs: SegmentCostTable,
    segment: int,
    width: float,
    prev_width: float,
    size: int,
) -> tuple[float, float, float, int]:
    """(compute s alone, launch + memory s, utilisation share, activation bytes) of a batch of
    ``size`` requests of (segment, width, previous width) on ``spec`` (the module docstring's
    ``W / C``, ``launch + M / B``, ``u_b`` and the activations it holds)."""
    cost = costs.get(segment, width, prev_width)
    activation_bytes = size * (cost.input_bytes_per_image + cost.activation_bytes_per_image)
    compute_s = size * cost.flops_per_image / spec.achieved_flops_per_s
    memory_s = (cost.param_bytes + activation_bytes) / spec.memory_bandwidth_bytes_per_s
    fixed_s = spec.launch_overhead_s + memory_s
    return compute_s, fixed_s, compute_s / (compute_s + fixed_s), activation_bytes


def batch_alone_s(
    spec: DeviceSpec,
    costs: SegmentCostTable,
    segment: int,
    width: float,
    prev_width: float,
    size: int,
) -> float:
    """Seconds a batch takes alone on an idle device: ``t_alone = launch + W / C + M / B``."""
    compute_s, fixed_s, _, _ = batch_cost(spec, costs, segment, width, prev_width, size)
    return compute_s + fixed_s


class SimInstance:
    """A loaded (segment, width) instance on a simulated device (the executor's opaque handle).

    An instance runs one batch at a time, so the batch's state lives here until its end event;
    that end event's callback is bound once per instance, not once per batch.
    """

    __slots__ = (
        "activation_bytes",
        "done",
        "end_batch",
        "outputs",
        "param_bytes",
        "ready_s",
        "running",
        "segment",
        "share",
        "width",
    )

    def __init__(
        self,
        segment: int,
        width: float,
        param_bytes: int,
        ready_s: float,
        end_batch: Callable[[SimInstance], None],
    ) -> None:
        self.segment = segment
        self.width = width
        self.param_bytes = param_bytes
        self.ready_s = ready_s
        """When its weights have arrived on the device (the first batch waits for it)."""
        self.running = False
        self.end_batch = partial(end_batch, self)
        """The end event of its running batch."""
        self.share = 0.0
        """Utilisation share of the running batch."""
        self.activation_bytes = 0
        """Activation bytes of the running batch."""
        self.outputs: Sequence[object] = ()
        self.done: BatchDone | None = None


class SimulatedBackend:
    """One simulated device (see the module docstring for the model).

    Implements :class:`~hetsched.slim.executor.backend.ExecutorBackend` and
    :class:`~hetsched.slim.executor.backend.EnergyReporter`.

    Args:
        spec: The device (datasheet entry or measured profile).
        costs: FLOPs and bytes of every (segment, width, previous width).
        loop: The simulated clock (anything with ``now_s`` and ``schedule``).
        name: Name in telemetry (default: the device's).
    """

    energy_source = "model"
    readings_follow_batches = True
    """Power and utilisation change only when a batch starts or ends (the executor may keep its
    telemetry between those moments)."""

    def __init__(
        self, spec: DeviceSpec, costs: SegmentCostTable, loop, name: str | None = None
    ) -> None:
        self.spec = spec
        self.costs = costs
        self.loop = loop
        self.name = name or spec.name
        self.memory_bytes = spec.memory_bytes
        self._flops_per_s = spec.achieved_flops_per_s
        self._knee = spec.knee_utilization
        self._power_range_w = spec.max_power_w - spec.idle_power_w
        self._batch_cache: dict[_BatchKey, tuple[float, float, float, int]] = {}
        self._instance_bytes = 0
        self._activation_bytes = 0
        self._load = 0.0
        self._running = 0
        self._power_w = spec.idle_power_w
        self._energy_j = 0.0
        self._energy_since_s = loop.now_s()
        self._slowdown = 1.0

    # -- runtime changes (hetsched.slim.sim.runtime_changes) --------------------------------------

    def set_slowdown(self, factor: float) -> None:
        """Batches that start from now on take ``factor`` times longer, launch, memory and compute
        alike (throttled clocks, a co-tenant's share); 1.0: normal again."""
        self._slowdown = factor

    # -- the ExecutorBackend protocol -----------------------------------------------------------

    @property
    def max_power_w(self) -> float:
        """Board power limit."""
        return self.spec.max_power_w

    def instance_bytes(self, segment: int, width: float) -> int:
        """Weights of one (segment, width) instance (CANLOAD's estimate)."""
        return self.costs.instance_param_bytes(segment, width)

    def vram_used_bytes(self) -> int:
        """Loaded weights plus the activations of running batches."""
        return self._instance_bytes + self._activation_bytes

    def utilization_pct(self) -> float:
        """Compute utilisation now: the running batches' shares, at most 100 %."""
        return 100.0 * (self._load if self._load < 1.0 else 1.0)

    def power_w(self) -> float:
        """Power draw now."""
        return self._power_w

    def energy_j(self) -> float:
        """Energy since creation: the exact integral of the piecewise-constant power."""
        return self._energy_j + self._power_w * (self.loop.now_s() - self._energy_since_s)

    def load(self, segment: int, width: float) -> SimInstance:
        """Books the instance's weights; they are usable once copied to the device."""
        param_bytes = self.instance_bytes(segment, width)
        self._instance_bytes += param_bytes
        copy_s = param_bytes / self.spec.host_to_device_bytes_per_s
        return SimInstance(segment, width, param_bytes, self.loop.now_s() + copy_s, self._end_batch)

    def unload(self, handle: SimInstance) -> None:
        """Frees the instance's weights.

        Raises:
            RuntimeError: If a batch is running on it (the executor must never do that).
        """
        if handle.running:
            raise RuntimeError(f"unload of a running instance {handle.segment}/{handle.width}")
        self._instance_bytes -= handle.param_bytes

    def run_batch(
        self, handle: SimInstance, key: SegmentKey, inputs: Sequence[object], done: BatchDone
    ) -> None:
        """Schedules the batch's end on the loop; ``done`` gets the inputs back as outputs.

        Raises:
            RuntimeError: If ``handle`` is already running a batch, or is narrower than the key.
        """
        if handle.running:
            raise RuntimeError(f"instance {handle.segment}/{handle.width} is busy")
        if handle.width < key.width or handle.segment != key.segment:
            raise RuntimeError(f"instance {handle.segment}/{handle.width} cannot run {key}")
        cache_key = (key.segment, handle.width, key.prev_width, len(inputs))
        cached = self._batch_cache.get(cache_key)
        if cached is None:
            cached = self._batch_cache[cache_key] = self._batch_cost(cache_key)
        compute_s, fixed_s, share, activation_bytes = cached
        now_s = self.loop.now_s()
        self._set_load(now_s, self._load + share)
        load = self._load
        if load <= self._knee:
            slowdown = 1.0 + LINEAR_INTERFERENCE * load
        else:
            used = load if load < 1.0 else 1.0
            excess = (used - self._knee) / (1.0 - self._knee)
            slowdown = (
                (1.0 + LINEAR_INTERFERENCE * used)
                * (1.0 + KNEE_SLOWDOWN * excess * excess)
                * (load if load > 1.0 else 1.0)
            )
        start_s = handle.ready_s if handle.ready_s > now_s else now_s
        factor = self._slowdown  # a runtime change's; 1.0 leaves every figure exactly as it was
        duration_s = start_s - now_s + fixed_s * factor + compute_s * slowdown * factor
        handle.running = True
        handle.share = share
        handle.activation_bytes = activation_bytes
        handle.outputs = inputs
        handle.done = done
        self._running += 1
        self._activation_bytes += activation_bytes
        self.loop.schedule(now_s + duration_s, handle.end_batch)

    # -- model ------------------------------------------------------------------------------------

    def _batch_cost(self, cache_key: _BatchKey) -> tuple[float, float, float, int]:
        """(compute s alone, launch + memory s, utilisation share, activation bytes) of a batch."""
        return batch_cost(self.spec, self.costs, *cache_key)

    def _end_batch(self, handle: SimInstance) -> None:
        """A batch's end event: release its share and activations, then tell the executor."""
        handle.running = False
        self._running -= 1
        self._activation_bytes -= handle.activation_bytes
        # Rounding must not leave a phantom load behind once the device is empty.
        self._set_load(self.loop.now_s(), self._load - handle.share if self._running else 0.0)
        if handle.done is not None:  # set by run_batch before this end event was scheduled
            handle.done(handle.outputs)

    def _set_load(self, now_s: float, load: float) -> None:
        """Integrates energy up to now at the old power, then sets the new load and power.

        Twice per batch, so ``min``/``max`` are written as conditionals (no builtin calls).
        """
        self._energy_j += self._power_w * (now_s - self._energy_since_s)
        self._energy_since_s = now_s
        self._load = load
        used = load if load < 1.0 else 1.0
        excess = (used - self._knee) / (1.0 - self._knee)
        if excess < 0.0:
            excess = 0.0
        level = POWER_LINEAR_SHARE * used + (1.0 - POWER_LINEAR_SHARE) * excess * excess
        self._power_w = self.spec.idle_power_w + self._power_range_w * level
