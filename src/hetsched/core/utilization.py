"""Utilisation readers of a live device: what CANLOAD (Algorithm 1 line 17) reads.

* GPUs: NVML's utilisation rate (the share of the last sample period a kernel ran, the paper's
  "GPU util"). Device memory is read from torch instead (``torch.cuda.memory_allocated``: the
  memory of the backend's own instances, which is what CANLOAD weighs against M_max).
* CPU: the busy share of the cores between two reads, from ``psutil`` (``/proc/stat`` on Linux),
  either of the whole machine (``scope="system"``) or of this process (``scope="process"``: what
  the live backend's U_blk check and ``hetsched slim profile`` use, because on a shared machine
  the other jobs' load is not the executor's to react to).

Every reader has a ``source`` naming where its figures come from.
"""

from __future__ import annotations

import importlib
import math
import time
from typing import Any, Literal, Protocol

from hetsched.core.errors import ConfigError
from hetsched.core.nvml import NVML_MIN_READ_INTERVAL_S, nvml_handle

MIN_INTERVAL_S = 0.1
"""CPU times advance in clock ticks (10 ms on Linux), so a reading over a shorter interval than
this is mostly tick noise; until it has passed, the previous value is returned (which also keeps
a reader called at every executor step cheap)."""


class UtilizationReader(Protocol):
    """Anything that reports a device's utilisation in percent."""

    source: str

    def utilization_pct(self) -> float | None:
        """The latest utilisation in percent (0-100), or None before there is one."""
        ...


def _psutil() -> Any:
    try:
        return importlib.import_module("psutil")
    except ImportError:
        raise ConfigError("CPU utilisation needs psutil: pip install 'hetsched[serve]'") from None


class CpuUtilization:
    """Busy share of the CPU cores since the previous read (the first read: since creation).

    Args:
        scope: ``system`` counts every process's busy time (over all cores); ``process`` counts
            only this process's CPU time, divided by the cores' wall time.
        min_interval_s: Reads closer than this to the previous one return its value (0 for a
            caller that reads exactly at the ends of the windows it measures).
    """

    def __init__(
        self,
        scope: Literal["system", "process"] = "system",
        min_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self._psutil = _psutil()
        self.scope = scope
        self.min_interval_s = min_interval_s
        self.source = f"psutil-{scope}"
        self._cores = self._psutil.cpu_count() or 1
        self._process = self._psutil.Process() if scope == "process" else None
        self._last = self._sample()
        self._last_s = time.monotonic()
        self._last_pct: float | None = None

    def _sample(self) -> tuple[float, float]:
        """(busy core-seconds, elapsed core-seconds) as cumulative counters."""
        if self._process is not None:
            times = self._process.cpu_times()
            return times.user + times.system, time.monotonic() * self._cores
        times = self._psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0)
        total = sum(times)
        return total - idle, total

    def utilization_pct(self) -> float | None:
        """Mean busy share in percent since the previous read (the previous value within
        ``min_interval_s`` of it; None before a first interval has passed)."""
        now_s = time.monotonic()
        if now_s - self._last_s < self.min_interval_s:
            return self._last_pct
        busy, total = self._sample()
        d_busy, d_total = busy - self._last[0], total - self._last[1]
        if d_total <= 0:  # no clock tick counted yet
            return self._last_pct
        self._last, self._last_s = (busy, total), now_s
        self._last_pct = min(100.0, max(0.0, 100.0 * d_busy / d_total))
        return self._last_pct


class NvmlUtilization:
    """NVML's GPU utilisation rate of CUDA device ``cuda_index`` (the driver's last sample).

    Read at most every ``min_interval_s`` (the previous value in between): the driver updates the
    rate once per sample period (1/6 s to 1 s), and each read is a driver call that CANLOAD and the
    router's telemetry would otherwise make several times per image.
    """

    def __init__(self, cuda_index: int, min_interval_s: float = NVML_MIN_READ_INTERVAL_S) -> None:
        self._pynvml, self._handle = nvml_handle(cuda_index)
        self.source = "nvml"
        self.min_interval_s = min_interval_s
        self._last_s = -math.inf
        self._last_pct = 0.0

    def utilization_pct(self) -> float | None:
        now_s = time.monotonic()
        if now_s - self._last_s >= self.min_interval_s:
            self._last_pct = float(self._pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            self._last_s = now_s
        return self._last_pct
