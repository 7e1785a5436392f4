"""Router-side stand-ins for the executor and accuracy-table issues, so the router runs end to end.

The router experiment needs three things that other issues own: the greedy executor on a simulated
device (issue 3: ``hetsched.slim.executor``/``backends``/``network``/``core.devices``), the segment
costs and the accuracy table (model issue: ``hetsched.slim.costs``/``accuracy``). Until those land,
:func:`hetsched.slim.scenario.build_cluster` uses these deliberately small models; each implements
only the cluster's :class:`~hetsched.slim.cluster.SegmentServer` / accuracy interfaces, so swapping
in the real modules changes one function.

* :class:`QueueingServer`: a per-server FIFO batched by key (segment, w_req, w_prev) up to
  ``max_batch``, ``slots`` concurrent instances sharing the device's achieved FLOP/s, a fixed
  launch overhead per batch; utilisation = busy slots; power linear from idle to max in it.
* :class:`SharedLink`: one shared medium (Wi-Fi is one): transfers are serialised, each costs
  bytes / bandwidth, plus a fixed latency.
* :data:`SEGMENT_GFLOP` / :func:`segment_output_bytes`: CIFAR ResNet-18 shapes cut into four
  segments (stem + stage 1, stages 2, 3, 4 + classifier); a conv's FLOPs scale with
  w_in · w_out.
* :class:`PaperAccuracyTable`: the paper's Tables I/II with nearest-neighbour lookup of prefixes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.slim.cluster import SegmentDone, ServerTelemetry


@dataclass(frozen=True)
class DeviceModel:
    """What the queueing server needs to know about a device."""

    name: str
    achieved_tflops: float
    """FP32 throughput small CNN batches reach (a fraction of the datasheet peak)."""
    idle_power_w: float
    max_power_w: float
    launch_overhead_s: float = 0.0015


DEVICE_MODELS = {
    # Datasheet peaks 13.4 and ~6 TFLOP/s (ARCHITECTURE.md); small batches reach about a quarter.
    "rtx-2080-ti": DeviceModel("rtx-2080-ti", 3.3, 20.0, 250.0),
    "gtx-980-ti": DeviceModel("gtx-980-ti", 1.5, 15.0, 250.0),
}

SEGMENT_GFLOP = (0.31, 0.27, 0.27, 0.27)
"""FLOPs per image of each segment at width 1.0 (CIFAR ResNet-18, ~1.1 GFLOP in all)."""

_OUTPUT_BYTES = (64 * 32 * 32 * 4, 128 * 16 * 16 * 4, 256 * 8 * 8 * 4, 100 * 4)
_INPUT_BYTES = 3 * 32 * 32 * 4


def segment_gflop(segment: int, width: float, prev_width: float | None) -> float:
    """GFLOP of one image through ``segment``: first conv ∝ w_prev · w, the rest ∝ w²."""
    w_in = 1.0 if prev_width is None else prev_width
    return SEGMENT_GFLOP[segment] * (0.25 * w_in * width + 0.75 * width * width)


def segment_input_bytes(segment: int, prev_width: float | None) -> int:
    """Bytes of the activation a request needs moved before running ``segment``."""
    if segment == 0:
        return _INPUT_BYTES
    return int(_OUTPUT_BYTES[segment - 1] * (1.0 if prev_width is None else prev_width))


class QueueingServer:
    """One simulated server: keyed batching, shared compute, utilisation-driven power."""

    def __init__(
        self, loop, name: str, device: DeviceModel, max_batch: int = 16, slots: int = 2
    ) -> None:
        self.loop, self.name, self.device = loop, name, device
        self.max_batch, self.slots = max_batch, slots
        self._queue: list[tuple[int, float, float | None, SegmentDone]] = []
        self._running = 0

    def submit(
        self, segment: int, width: float, prev_width: float | None, done: SegmentDone
    ) -> None:
        self._queue.append((segment, width, prev_width, done))
        self._start_batches()

    def _start_batches(self) -> None:
        while self._queue and self._running < self.slots:
            key = self._queue[0][:3]
            batch = [r for r in self._queue if r[:3] == key][: self.max_batch]
            for request in batch:
                self._queue.remove(request)
            self._running += 1
            gflop = segment_gflop(*key) * len(batch)
            share_tflops = self.device.achieved_tflops / self.slots
            duration_s = self.device.launch_overhead_s + gflop / (share_tflops * 1e3)
            self.loop.schedule_in(duration_s, lambda batch=batch: self._finish(batch))

    def _finish(self, batch: list) -> None:
        self._running -= 1
        for _segment, width, _prev_width, done in batch:
            done(width)
        self._start_batches()

    def telemetry(self) -> ServerTelemetry:
        utilization = self._running / self.slots
        power_w = (
            self.device.idle_power_w
            + (self.device.max_power_w - self.device.idle_power_w) * utilization
        )
        return ServerTelemetry(
            len(self._queue), power_w, self.device.max_power_w, 100.0 * utilization
        )


class SharedLink:
    """A shared network medium: transfers queue behind each other (bytes / bandwidth + latency)."""

    def __init__(self, loop, bandwidth_bytes_per_s: float, latency_s: float) -> None:
        self.loop = loop
        self.bandwidth_bytes_per_s, self.latency_s = bandwidth_bytes_per_s, latency_s
        self._free_s = 0.0

    def transfer_time(
        self, segment: int, prev_width: float | None, source: int | None, target: int
    ) -> float:
        now = self.loop.now_s()
        start = max(now, self._free_s)
        self._free_s = start + segment_input_bytes(segment, prev_width) / self.bandwidth_bytes_per_s
        return self._free_s - now + self.latency_s


LINK_PRESETS: dict[str, Callable] = {
    # 802.11ac in practice: ~300 Mbit/s of goodput, a few milliseconds of latency.
    "wifi5": lambda loop: SharedLink(loop, 300e6 / 8, 0.003),
}

PAPER_TOP1 = {
    (0.25, 0.25, 0.25, 0.25): 0.7030,
    (0.5, 0.5, 0.5, 0.5): 0.7299,
    (0.75, 0.75, 0.75, 0.75): 0.7493,
    (1.0, 1.0, 1.0, 1.0): 0.7643,
    (1.0, 0.75, 0.5, 0.25): 0.7135,
    (0.75, 1.0, 0.25, 0.5): 0.7233,
    (0.5, 0.25, 1.0, 0.75): 0.7453,
    (0.25, 0.5, 0.75, 1.0): 0.7533,
}
"""The paper's Table I (uniform widths) and Table II (mixed widths), top-1 on CIFAR-100."""


class PaperAccuracyTable:
    """Tables I/II with nearest-neighbour lookup: a prefix (or full tuple) gets the mean top-1 of
    the entries whose first widths are closest in L1 distance."""

    def lookup(self, widths: Sequence[float]) -> float:
        k = len(widths)
        distances = [
            (sum(abs(a - b) for a, b in zip(widths, known[:k], strict=False)), top1)
            for known, top1 in PAPER_TOP1.items()
        ]
        nearest = min(d for d, _ in distances)
        return float(np.mean([top1 for d, top1 in distances if d == nearest]))

    def correct(self, widths: Sequence[float], image_index: int) -> bool | None:
        """No per-image answers in a published table."""
        return None
