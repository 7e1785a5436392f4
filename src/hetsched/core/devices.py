"""Device specs: what the simulator needs to know about an accelerator, and where it comes from.

A :class:`DeviceSpec` is either a built-in datasheet entry (``DEVICES``: the Slim paper's RTX
2080 Ti and GTX 980 Ti, current datacentre GPUs and a CPU) or a *profile* written by
``hetsched slim profile`` on a real device (a JSON file with the same fields plus the raw
measurements it was fitted from). Datasheet peaks are never reached by small CNN batches (they are
launch- and memory-bound), so every spec carries the fraction of the peak that such batches achieve;
datasheet entries assume a quarter, a profile measures it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from hetsched.core.config import StrictModel, validate_config
from hetsched.core.errors import ConfigError, UnknownNameError

GIB = 1024**3


class DeviceSpec(StrictModel, use_attribute_docstrings=True):
    """One device as the simulated backend models it (units in every name)."""

    name: str
    kind: Literal["gpu", "cpu"] = "gpu"
    peak_tflops: float = Field(gt=0)
    """FP32 datasheet peak."""
    achieved_fraction: float = Field(default=0.25, gt=0, le=1)
    """Share of the peak that small CNN batches reach (measured by a profile)."""
    memory_bytes: int = Field(gt=0)
    """Device memory (VRAM; host memory for a CPU): the ceiling for the executor's M_max."""
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    host_to_device_bytes_per_s: float = Field(default=12e9, gt=0)
    """Copy rate of weights when an instance is loaded (PCIe 3.0 x16 in practice; a CPU's
    memory copy)."""
    idle_power_w: float = Field(ge=0)
    max_power_w: float = Field(gt=0)
    launch_overhead_s: float = Field(default=0.0015, ge=0)
    """Fixed cost of one batch (kernel launches, framework dispatch), whatever its size."""
    knee_utilization: float = Field(default=0.92, gt=0, lt=1)
    """Utilisation up to which latency and power grow near-linearly (the paper's Figs 1-3);
    beyond it contention grows sharply."""
    source: str = "datasheet"
    """Where the figures come from: ``datasheet`` or the profile that measured them."""

    @property
    def achieved_flops_per_s(self) -> float:
        """FLOP/s a batch running alone on the device reaches."""
        return self.peak_tflops * 1e12 * self.achieved_fraction


def _gpu(name: str, tflops: float, gib: float, gb_per_s: float, idle_w: float, max_w: float):
    return DeviceSpec(
        name=name,
        peak_tflops=tflops,
        memory_bytes=int(gib * GIB),
        memory_bandwidth_bytes_per_s=gb_per_s * 1e9,
        idle_power_w=idle_w,
        max_power_w=max_w,
    )


DEVICES: dict[str, DeviceSpec] = {
    spec.name: spec
    for spec in (
        # The paper's servers (ARCHITECTURE.md "Device facts"); idle power from typical readings.
        _gpu("rtx-2080-ti", 13.4, 11, 616, 20.0, 250.0),
        _gpu("gtx-980-ti", 6.0, 6, 336, 15.0, 250.0),
        _gpu("t4", 8.1, 16, 320, 10.0, 70.0),
        _gpu("v100", 15.7, 32, 900, 40.0, 300.0),
        _gpu("a100", 19.5, 80, 2039, 50.0, 400.0),
        _gpu("h100", 67.0, 80, 3350, 70.0, 700.0),
        # H200 SXM: the H100's compute with 141 GB of HBM3e at 4.8 TB/s (datasheet).
        _gpu("h200", 67.0, 141, 4800, 70.0, 700.0),
        # Two cores of an AVX-512 server CPU: benchmarks/RESULTS.md measured ~300 GFLOP/s on
        # batch-32 segments here, so most of the peak is reached; dispatch costs ~0.3 ms a batch.
        DeviceSpec(
            name="cpu",
            kind="cpu",
            peak_tflops=0.35,
            achieved_fraction=0.8,
            memory_bytes=8 * GIB,
            memory_bandwidth_bytes_per_s=20e9,
            host_to_device_bytes_per_s=20e9,
            idle_power_w=10.0,
            max_power_w=35.0,
            launch_overhead_s=0.0003,
        ),
    )
}


def load_device(name_or_path: str | Path) -> DeviceSpec:
    """A built-in spec by name, or a profile JSON written by ``hetsched slim profile``.

    Raises:
        UnknownNameError: For a name that is neither built in nor an existing file.
        ConfigError: For a profile file that is not JSON or has a bad field.
    """
    key = str(name_or_path)
    if key in DEVICES:
        return DEVICES[key]
    path = Path(key)
    if not path.is_file():
        raise UnknownNameError(
            f"unknown device {key!r}; known: {', '.join(sorted(DEVICES))} (or a profile .json)"
        )
    try:
        data: Any = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}") from None
    if isinstance(data, dict):
        data = data.get("device", data)
    return validate_config(data, DeviceSpec, source=str(path))
