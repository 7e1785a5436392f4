"""NVML access for one CUDA device: the handle that the energy meter and the readers share.

NVML (``nvidia-ml-py``, imported as ``pynvml``) numbers GPUs as the driver does, CUDA as
``CUDA_VISIBLE_DEVICES`` lists them; :func:`nvml_handle` maps ``cuda:N`` through that variable
(indices or GPU UUIDs) so the counter read is the one of the GPU torch runs on.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

NVML_MIN_READ_INTERVAL_S = 0.05
"""The shortest interval between two NVML reads of one figure (power, utilisation). A read is a
driver call: on the lent H200 virtual machine, reads at every segment completion held the live
GPU cluster to 50 images/s where a CPU server served 318 (benchmarks/RESULTS.md). The driver
samples utilisation every 1/6 s to 1 s and power about every 20-100 ms, so 50 ms loses nothing."""


class NvmlUnavailableError(RuntimeError):
    """NVML cannot serve this device; the message says why (shown when a fallback is chosen)."""


def nvml_handle(cuda_index: int) -> tuple[ModuleType, Any]:
    """The ``pynvml`` module (initialised) and the handle of CUDA device ``cuda_index``.

    Raises:
        NvmlUnavailableError: If nvidia-ml-py is not installed, NVML does not initialise (no
            driver), or the device does not exist.
    """
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError:
        raise NvmlUnavailableError("nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        entries = [e.strip() for e in visible.split(",") if e.strip()] if visible else []
        if not entries:
            return pynvml, pynvml.nvmlDeviceGetHandleByIndex(cuda_index)
        if cuda_index >= len(entries):
            raise NvmlUnavailableError(
                f"cuda:{cuda_index} is not among CUDA_VISIBLE_DEVICES={visible!r}"
            )
        entry = entries[cuda_index]
        if entry.isdigit():
            return pynvml, pynvml.nvmlDeviceGetHandleByIndex(int(entry))
        return pynvml, pynvml.nvmlDeviceGetHandleByUUID(entry)
    except pynvml.NVMLError as error:
        raise NvmlUnavailableError(f"NVML: {error}") from None
