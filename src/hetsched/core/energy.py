"""Energy meters of a live device, each naming its ``source`` (ARCHITECTURE.md "Energy (live)").

Three sources, best first; :func:`best_meter` picks the first that works and says why the better
ones did not:

* ``nvml``: NVIDIA's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules
  since the driver loaded; Volta and newer), for ``cuda:N``.
* ``rapl``: Intel/AMD RAPL package counters in ``/sys/class/powercap/intel-rapl:N/energy_uj``
  (microjoules, wrapping at ``max_energy_range_uj``), for ``cpu``, where the files are readable
  (often root only).
* ``power-model``: no counter; power is the calibrated model of a
  :class:`~hetsched.core.devices.DeviceSpec`, linear from idle to max power in the utilisation
  (the paper's Fig. 2 shape below the knee), integrated over the time between reads. This is an
  estimate, and every figure made from it carries the source so that it is never read as measured.

Every meter counts joules from its creation (:meth:`EnergyMeter.energy_j`) and reports the mean
power since the previous :meth:`EnergyMeter.power_w` call. A meter whose counter is costly to read
(NVML: a driver call, milliseconds on a virtual machine) sets ``min_read_interval_s``: a
``power_w`` call closer than that to the previous read returns the previous figure. The router's
telemetry asks for power at every segment completion, so unthrottled NVML reads were most of the
live GPU path's time (benchmarks/RESULTS.md "GPU round on an H200").
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from pathlib import Path

from hetsched.core.devices import DeviceSpec
from hetsched.core.nvml import NVML_MIN_READ_INTERVAL_S, NvmlUnavailableError, nvml_handle
from hetsched.core.utilization import UtilizationReader

POWERCAP_ROOT = Path("/sys/class/powercap")
_RAPL_PACKAGE = re.compile(r"intel-rapl:\d+")
"""Top-level RAPL zones (packages); their sub-zones (core, uncore, dram) are parts of them."""


class EnergyMeter(ABC):
    """A cumulative energy counter of one device.

    Attributes:
        source: ``nvml``, ``rapl`` or ``power-model``.
        explanation: One line for users: what is measured, or why it is only estimated.
    """

    source: str
    explanation: str
    min_read_interval_s: float = 0.0
    """``power_w`` reads the counter at most this often; closer calls get the previous figure."""

    def __init__(self) -> None:
        self._start_j = self._counter_j()
        self._last_s = time.monotonic()
        self._last_j = self._start_j
        self._last_power_w = 0.0

    @abstractmethod
    def _counter_j(self) -> float:
        """The device's cumulative energy in joules (any origin; must not go backwards)."""

    def energy_j(self) -> float:
        """Joules the device used since this meter was created."""
        return self._counter_j() - self._start_j

    def power_w(self) -> float:
        """Mean power in watts since the previous read (the first: since creation); within
        ``min_read_interval_s`` of it, that read's figure (0 before a first interval)."""
        now_s = time.monotonic()
        elapsed_s = now_s - self._last_s
        if elapsed_s <= 0 or elapsed_s < self.min_read_interval_s:
            return self._last_power_w
        now_j = self._counter_j()
        self._last_power_w = (now_j - self._last_j) / elapsed_s
        self._last_s, self._last_j = now_s, now_j
        return self._last_power_w


class NvmlEnergyMeter(EnergyMeter):
    """NVML's total-energy counter of CUDA device ``cuda_index``.

    Raises:
        NvmlUnavailableError: If NVML or the counter is not available for the device.
    """

    source = "nvml"
    min_read_interval_s = NVML_MIN_READ_INTERVAL_S

    def __init__(self, cuda_index: int) -> None:
        self._pynvml, self._handle = nvml_handle(cuda_index)
        try:
            self._pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except self._pynvml.NVMLError as error:
            raise NvmlUnavailableError(
                f"no total-energy counter on cuda:{cuda_index}: {error}"
            ) from None
        self.explanation = f"energy measured by NVML's total-energy counter of cuda:{cuda_index}"
        super().__init__()

    def _counter_j(self) -> float:
        return self._pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3


class RaplUnavailableError(RuntimeError):
    """No readable RAPL package zone; the message says why."""


class _RaplZone:
    """One package counter, unwrapped: the running total survives ``max_energy_range_uj``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._range_uj = int((folder / "max_energy_range_uj").read_text())
        self._last_uj = self._read_uj()
        self.total_uj = 0

    def _read_uj(self) -> int:
        return int((self.folder / "energy_uj").read_text())

    def update(self) -> int:
        """Adds the energy since the previous read; a reading below the last one wrapped once."""
        now_uj = self._read_uj()
        delta_uj = now_uj - self._last_uj
        if delta_uj < 0:
            delta_uj += self._range_uj
        self._last_uj = now_uj
        self.total_uj += delta_uj
        return self.total_uj


class RaplEnergyMeter(EnergyMeter):
    """The sum of the RAPL package counters under ``root`` (one per CPU socket).

    Read at least once per counter range (about an hour at 60 W for a 2^32 µJ range) so that a
    wrap is never missed; the live backend reads it at every telemetry sample.

    Raises:
        RaplUnavailableError: If there is no package zone, or its counter is not readable.
    """

    source = "rapl"

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        folders = sorted(
            p for p in Path(root).glob("intel-rapl:*") if _RAPL_PACKAGE.fullmatch(p.name)
        )
        if not folders:
            raise RaplUnavailableError(f"no RAPL package zone under {root}")
        try:
            self._zones = [_RaplZone(folder) for folder in folders]
        except (OSError, ValueError) as error:
            raise RaplUnavailableError(f"RAPL counters not readable: {error}") from None
        names = ", ".join(p.name for p in folders)
        self.explanation = f"energy measured by the RAPL package counters ({names})"
        super().__init__()

    def _counter_j(self) -> float:
        return sum(zone.update() for zone in self._zones) / 1e6


class PowerModelMeter(EnergyMeter):
    """The calibrated power model: ``idle + (max - idle) x utilisation``, integrated over time.

    Each read integrates the power at the utilisation ``utilization`` reports for the interval
    since its previous read (a CPU reader reports that interval's mean; a GPU reader its latest
    sample), so give the meter a reader of its own.

    Args:
        spec: Gives idle and max power.
        utilization: The device's utilisation; None before a first sample counts as idle.
        reason: Why no counter was used (goes into ``explanation``).
    """

    source = "power-model"

    def __init__(self, spec: DeviceSpec, utilization: UtilizationReader, reason: str = "") -> None:
        self.spec = spec
        self._utilization = utilization
        self._total_j = 0.0
        self._integrated_s = time.monotonic()
        why = f" ({reason})" if reason else ""
        self.explanation = (
            f"no energy counter readable{why}: energy is ESTIMATED by the power model of"
            f" {spec.name!r} ({spec.source}): {spec.idle_power_w:g} W idle to"
            f" {spec.max_power_w:g} W at 100 % utilisation ({utilization.source})"
        )
        super().__init__()

    def power_at(self, utilization_pct: float) -> float:
        """Modelled power in watts at ``utilization_pct`` percent."""
        share = min(max(utilization_pct, 0.0), 100.0) / 100.0
        return self.spec.idle_power_w + (self.spec.max_power_w - self.spec.idle_power_w) * share

    def _counter_j(self) -> float:
        now_s = time.monotonic()
        utilization_pct = self._utilization.utilization_pct()
        self._total_j += self.power_at(utilization_pct or 0.0) * (now_s - self._integrated_s)
        self._integrated_s = now_s
        return self._total_j


def best_meter(
    device: str,
    spec: DeviceSpec,
    utilization: UtilizationReader,
    powercap_root: Path = POWERCAP_ROOT,
) -> EnergyMeter:
    """The best energy meter for ``device`` (``cpu`` or ``cuda:N``): NVML, RAPL, else the model.

    Args:
        spec: The device's spec, for the power model if no counter is readable.
        utilization: A reader for the power model's exclusive use.
        powercap_root: Where RAPL zones are looked for (a test points it at a fake tree).
    """
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        try:
            return NvmlEnergyMeter(index)
        except NvmlUnavailableError as error:
            reason = str(error)
    else:
        try:
            return RaplEnergyMeter(powercap_root)
        except RaplUnavailableError as error:
            reason = str(error)
    return PowerModelMeter(spec, utilization, reason)
