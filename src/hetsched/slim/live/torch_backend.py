"""The live backend: real SlimResNet segments on ``cpu`` or ``cuda:N``, driven by Algorithm 1.

:class:`TorchBackend` implements :class:`~hetsched.slim.executor.backend.ExecutorBackend` for the
greedy executor on a :class:`~hetsched.core.realtime.RealTimeLoop`:

* ``load`` (line 7, after CANLOAD) extracts a standalone (segment, width) instance holding only its
  weights (:func:`~hetsched.slim.model.slimresnet.extract_segment`) and moves it to the device;
  ``unload`` (line 25) moves it back to the CPU, where it waits for the next load of its key, and
  frees the device's cached memory. Beyond the paper: instances of one key on one device share
  its weights (inference never writes them; the forward pass takes the width as an argument), so
  a scale-up (line 23, N_new more instances of a busy key) costs no copy and no extraction, and
  only the last instance of a key to unload moves its weights off the device. Before, each
  scale-up extracted or copied weights on the loop's thread and each unload synchronised the GPU:
  on an H200 the live executor loaded ~190 instances per round of 1,024 images and ran at 0.16 of
  a plain loop (RESULTS, "Second GPU round").
* ``run_batch`` (line 10, RUNBATCH) stacks the requests' activations into one batch and runs it
  under ``torch.inference_mode()`` on a worker thread (one per concurrently busy instance; torch
  releases the GIL while it computes; on CUDA each worker has its own stream; on the CPU at most
  :func:`cpu_compute_slots` compute at once, and the executor forms a batch only when one of
  them is free: ``batch_slots``), then hands the outputs back to the loop's thread with
  ``call_soon_threadsafe``, so the executor's state is only ever touched by that thread. An
  instance wider than the requested width (FINDFREEBESTFIT, line 5) runs at its own width, as
  the paper's instance does: the executor reports the instance's width as the executed one, the
  router takes it as the next segment's w_prev, and the output's channels match it.
* Telemetry: device memory from ``torch.cuda.memory_allocated`` on CUDA (the account of loaded
  instance bytes on the CPU, which has no allocator statistics); utilisation from NVML on NVIDIA
  GPUs, the busy share of the backend's compute slots on the CPU (:mod:`.busy`); power and
  energy from the best meter of :mod:`hetsched.core.energy` (on the CPU its power model reads this
  process's CPU share), whose ``source`` is kept beside every figure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import torch

from hetsched.core.devices import DeviceSpec
from hetsched.core.energy import EnergyMeter, best_meter
from hetsched.core.nvml import NvmlUnavailableError
from hetsched.core.utilization import CpuUtilization, NvmlUtilization, UtilizationReader
from hetsched.slim.executor.backend import BatchDone, SegmentKey
from hetsched.slim.live.busy import CPU_BUSY_WINDOW_S, BusyShare, cpu_compute_slots
from hetsched.slim.live.devices import device_spec_for, resolve_live_device
from hetsched.slim.model.checkpoint import load_model
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import (
    STAGE_CHANNELS,
    SegmentAtWidth,
    SlimResNet,
    extract_segment,
)


class ThreadsafeClock(Protocol):
    """The loop a backend hands completions to: :class:`~hetsched.core.realtime.RealTimeLoop`."""

    def now_s(self) -> float: ...

    def call_soon_threadsafe(self, callback: Any) -> Any: ...


@dataclass(eq=False)
class LiveInstance:
    """A loaded (segment, width) instance: the handle ``load`` gives the executor.

    Attributes:
        module: The standalone segment, on the device (one module shared by the key's loaded
            instances).
        param_bytes: Bytes of its weights (counted once per key in the memory account).
        busy: True while a batch runs on it (the backend refuses a second one).
        batches: Batches it ran.
        last_latency_s: Compute time of its last batch (stack, forward, copy back).
    """

    segment: int
    width: float
    module: SegmentAtWidth
    param_bytes: int
    busy: bool = False
    batches: int = 0
    last_latency_s: float = 0.0


def _raise(error: BaseException) -> None:
    raise error


class TorchBackend:
    """Runs SlimResNet segment instances on one live device.

    Args:
        model: The trained SlimResNet (its weights stay on the CPU as the source of instances), or
            a checkpoint path written by ``hetsched slim train``.
        loop: The executor's real-time loop; completions are posted to it.
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        spec: The device's spec for the power model and ``max_power_w`` (default: the built-in
            datasheet spec, :func:`device_spec_for`).
        meter: Energy meter (default: :func:`~hetsched.core.energy.best_meter` for the device).
        utilization: Utilisation reader (default: NVML on GPUs, falling back to this backend's
            busy share; on the CPU the busy share of its compute slots over
            :data:`CPU_BUSY_WINDOW_S`: a shared machine's other work must not block every load,
            and a CPU-time reading of the process lags by its interval).
        max_workers: Worker threads (at most this many batches run at once). On the CPU no more
            than :func:`cpu_compute_slots` run at once, whatever this says.
        name: The server's name in telemetry.

    Raises:
        ConfigError: For a bad device string or a device this machine lacks.
        DataError: For a missing or unreadable checkpoint.
    """

    def __init__(
        self,
        model: SlimResNet | str | Path,
        loop: ThreadsafeClock,
        device: str = "cpu",
        *,
        spec: DeviceSpec | None = None,
        meter: EnergyMeter | None = None,
        utilization: UtilizationReader | None = None,
        max_workers: int = 32,
        name: str | None = None,
    ) -> None:
        self.device = resolve_live_device(device)
        self._model = model if isinstance(model, SlimResNet) else load_model(Path(model), "cpu")
        self._model.eval()
        self._loop = loop
        self.spec = spec or device_spec_for(self.device)
        self.name = name or (
            self.spec.name if self.device.type == "cpu" else f"{self.spec.name}@{self.device}"
        )
        self.compute_slots = (
            min(max_workers, cpu_compute_slots()) if self.device.type == "cpu" else max_workers
        )
        """Batches that compute at once; the executor may start more, which wait for a slot."""
        self._busy_share = (
            BusyShare(CPU_BUSY_WINDOW_S, self.compute_slots)
            if self.device.type == "cpu"
            else BusyShare()
        )
        self._utilization = utilization or self._default_utilization()
        self.meter = meter or best_meter(str(self.device), self.spec, self._meter_utilization())
        self._costs = compute_cost_table(self._model.num_classes, widths=self._model.widths)
        self._pool = ThreadPoolExecutor(self.compute_slots, thread_name_prefix=f"{self.name}-batch")
        self._thread_state = threading.local()
        self._loaded: set[LiveInstance] = set()
        self._on_device: dict[tuple[int, float], tuple[SegmentAtWidth, int, int]] = {}
        """Per (segment, width) with instances loaded: the weights they share on the device, their
        parameter bytes and how many instances use them."""
        self._offloaded: dict[tuple[int, float], tuple[SegmentAtWidth, int]] = {}
        """One offloaded instance on the CPU with its parameter bytes, per (segment, width)."""
        self.batch_latencies_s: list[float] = []
        """Compute time of every batch, in completion order."""

    @property
    def batch_slots(self) -> int | None:
        """Batches that compute at once on the CPU (its compute slots), which the executor waits
        for before forming a batch; None on a GPU, whose streams run every started batch."""
        return self.compute_slots if self.device.type == "cpu" else None

    @property
    def energy_source(self) -> str:
        """Where energy and power figures come from (``nvml``, ``rapl`` or ``power-model``)."""
        return self.meter.source

    @property
    def max_power_w(self) -> float:
        return self.spec.max_power_w

    @property
    def memory_bytes(self) -> int:
        """The device's memory (VRAM_tot of line 14; host memory for the CPU)."""
        return self.spec.memory_bytes

    @property
    def loaded(self) -> tuple[LiveInstance, ...]:
        """Instances now on the device."""
        return tuple(self._loaded)

    def _default_utilization(self) -> UtilizationReader:
        if self.device.type == "cpu":
            return self._busy_share
        try:
            return NvmlUtilization(self.device.index or 0)
        except NvmlUnavailableError:
            return self._busy_share

    def _meter_utilization(self) -> UtilizationReader:
        """A reader of the power model's own (interval readers must not be shared). On the CPU it
        is this process's CPU share, which is what draws power (decoding and the loop included)."""
        if self.device.type == "cpu":
            return CpuUtilization("process")
        if isinstance(self._utilization, CpuUtilization):
            return CpuUtilization(self._utilization.scope, self._utilization.min_interval_s)
        return self._utilization

    # -- ExecutorBackend ---------------------------------------------------------------------------

    def instance_bytes(self, segment: int, width: float) -> int:
        """CANLOAD's estimate (line 14): the parameter bytes of the standalone instance."""
        return self._costs.instance_param_bytes(segment, width)

    def vram_used_bytes(self) -> int:
        """``torch.cuda.memory_allocated`` on CUDA; on the CPU the bytes of the loaded keys'
        weights (once per key: its instances share them)."""
        if self.device.type == "cuda":
            return int(torch.cuda.memory_allocated(self.device))
        return sum(param_bytes for _, param_bytes, _ in self._on_device.values())

    def utilization_pct(self) -> float | None:
        return self._utilization.utilization_pct()

    def power_w(self) -> float:
        """Mean power since the previous call, from the meter named by :attr:`energy_source`."""
        return self.meter.power_w()

    def energy_j(self) -> float:
        """Energy since the backend started, from the meter named by :attr:`energy_source`."""
        return self.meter.energy_j()

    def load(self, segment: int, width: float) -> LiveInstance:
        """Moves a (segment, width) instance's weights to the device (Algorithm 1 line 7).

        Another instance of the key already loaded lends its weights (no copy); else they come
        from the CPU copy that ``unload`` offloaded, or are extracted from the model the first
        time (extraction builds and slices the layers: tens of ms).
        """
        key = (segment, float(width))
        shared = self._on_device.get(key)
        if shared is not None:
            module, param_bytes, users = shared
        else:
            users = 0
            offloaded = self._offloaded.pop(key, None)
            if offloaded is not None:
                module, param_bytes = offloaded
            else:
                module = extract_segment(self._model, segment, float(width)).eval()
                module.requires_grad_(False)
                param_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
            if self.device.type != "cpu":  # on the CPU the weights are where they run already
                module = module.to(self.device)
        self._on_device[key] = (module, param_bytes, users + 1)
        instance = LiveInstance(segment, float(width), module, param_bytes)
        self._loaded.add(instance)
        return instance

    def unload(self, handle: LiveInstance) -> None:
        """Offloads to the CPU and frees the device memory (Algorithm 1 line 25).

        Weights that another loaded instance of the key still uses stay where they are; the last
        instance's are offloaded, and that CPU copy is kept for the next ``load`` of the same
        (segment, width): one per key, since a key's instances share one copy.

        Raises:
            RuntimeError: If a batch still runs on it, or it is not loaded here.
        """
        if handle.busy:
            raise RuntimeError(f"cannot unload a busy instance: {handle}")
        if handle not in self._loaded:
            raise RuntimeError(f"instance not loaded on {self.name}: {handle}")
        self._loaded.discard(handle)
        key = (handle.segment, handle.width)
        module, param_bytes, users = self._on_device.pop(key)
        if users > 1:
            self._on_device[key] = (module, param_bytes, users - 1)
            return
        if self.device.type != "cpu":
            module = module.to("cpu")
        # The spare per key makes the common reload a move, not an extraction; with shared
        # weights there is never more than one (separate copies per instance once grew by
        # +110 MB per CPU server over the first minutes of an overload soak).
        self._offloaded[key] = (module, param_bytes)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def run_batch(
        self, handle: LiveInstance, key: SegmentKey, inputs: Sequence[Any], done: BatchDone
    ) -> None:
        """Starts RUNBATCH (line 10) on a worker thread; ``done(outputs)`` runs on the loop.

        Each input is one request's activation (C x H x W, any device); each output is one
        image's result at the instance's width, on the CPU (the next segment may run on another
        server).

        Raises:
            RuntimeError: If the instance is busy or not loaded (the executor broke the contract).
            ValueError: If the key does not fit the instance or the inputs' channels.
        """
        if handle.busy or handle not in self._loaded:
            raise RuntimeError(f"instance not free on {self.name}: {handle}")
        if key.segment != handle.segment:
            raise ValueError(f"key {key} is for another segment than instance {handle}")
        if key.width > handle.width:
            raise ValueError(f"instance {handle} is narrower than the requested width of {key}")
        if not inputs:
            raise ValueError(f"empty batch for {key}")
        if key.segment > 0:
            expected = channel_count(STAGE_CHANNELS[key.segment - 1], key.prev_width)
            if inputs[0].shape[0] != expected:
                raise ValueError(
                    f"key {key}: input has {inputs[0].shape[0]} channels, previous width"
                    f" {key.prev_width} gives {expected}"
                )
        handle.busy = True
        self._pool.submit(self._run, handle, list(inputs), done)

    # -- worker side -------------------------------------------------------------------------------

    def _run(self, handle: LiveInstance, inputs: list[Any], done: BatchDone) -> None:
        """On a worker thread: the forward pass; then hands the outputs to the loop's thread."""
        self._busy_share.started()  # here, not at submission: a batch may wait for a slot
        try:
            start_s = time.perf_counter()
            with torch.inference_mode(), self._worker_stream():
                batch = torch.stack(inputs).to(self.device, non_blocking=True)
                outputs = handle.module(batch).cpu()  # .cpu() waits for a CUDA forward to finish
            latency_s = time.perf_counter() - start_s
        except BaseException as error:  # surfaces on the loop's thread, never lost
            self._busy_share.finished()
            self._loop.call_soon_threadsafe(partial(_raise, error))
            return
        self._busy_share.finished()

        def complete() -> None:
            handle.busy = False
            handle.batches += 1
            handle.last_latency_s = latency_s
            self.batch_latencies_s.append(latency_s)
            done(list(outputs.unbind(0)))

        self._loop.call_soon_threadsafe(complete)

    def _worker_stream(self) -> AbstractContextManager[Any]:
        """On CUDA, this worker thread's own stream, so that concurrent batches overlap on the
        GPU instead of queueing on the default stream; nothing on the CPU."""
        if self.device.type != "cuda":
            return nullcontext()
        stream = getattr(self._thread_state, "stream", None)
        if stream is None:
            stream = self._thread_state.stream = torch.cuda.Stream(self.device)
        # The weights were copied to the device on the default stream (load): wait for them.
        stream.wait_stream(torch.cuda.default_stream(self.device))
        return torch.cuda.stream(stream)

    def close(self) -> None:
        """Waits for running batches, stops the workers and unloads every idle instance."""
        self._pool.shutdown(wait=True)
        for instance in list(self._loaded):
            if not instance.busy:
                self.unload(instance)
