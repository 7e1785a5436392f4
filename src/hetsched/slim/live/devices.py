"""The live devices of this machine: which exist, their datasheet specs, and inputs to time them.

Shared by the live backend (:mod:`hetsched.slim.live.torch_backend`), the live cluster and device
profiling (:mod:`hetsched.slim.live.profile`).
"""

from __future__ import annotations

import os
import re

import torch

from hetsched.core.devices import DEVICES, DeviceSpec
from hetsched.core.errors import ConfigError
from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import STAGE_CHANNELS


def resolve_live_device(device: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N`` as a torch device that exists on this machine.

    Raises:
        ConfigError: For another string, CUDA where there is none, or a GPU index out of range.
    """
    match = re.fullmatch(r"cpu|cuda(?::(\d+))?", device)
    if match is None:
        raise ConfigError(f"device {device!r}: expected cpu, cuda or cuda:N")
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {device!r}: CUDA is not available on this machine")
    index = int(match.group(1) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(f"device {device!r}: this machine has {count} CUDA device(s)")
    return torch.device("cuda", index)


def device_spec_for(device: torch.device) -> DeviceSpec:
    """The datasheet spec of a live device: the built-in ``cpu`` spec, or the GPU whose built-in
    name (e.g. ``rtx-2080-ti``) appears in the CUDA device name; memory is this machine's.

    Raises:
        ConfigError: For a GPU with no built-in spec (pass a profile JSON instead).
    """
    if device.type == "cpu":
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return DEVICES["cpu"].model_copy(update={"memory_bytes": memory})
    gpu_name = torch.cuda.get_device_name(device)
    squashed = re.sub(r"[^a-z0-9]", "", gpu_name.lower())
    for name, spec in DEVICES.items():
        if spec.kind == "gpu" and name.replace("-", "") in squashed:
            memory = torch.cuda.get_device_properties(device).total_memory
            return spec.model_copy(update={"name": name, "memory_bytes": memory})
    raise ConfigError(
        f"no built-in spec for GPU {gpu_name!r} (known: {', '.join(DEVICES)});"
        " give a profile written by `hetsched slim profile`"
    )


def random_activations(
    segment: int,
    prev_width: float,
    batch: int,
    image_size: int = 32,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """A random batch of what ``segment`` takes: images for segment 0, else the activation the
    previous segment produces at ``prev_width`` (latency does not depend on the values).
    """
    if segment == 0:
        return torch.randn(batch, 3, image_size, image_size, device=device)
    side = image_size // 2 ** (segment - 1)  # stage 1 keeps the size, stages 2-4 halve it
    channels = channel_count(STAGE_CHANNELS[segment - 1], prev_width)
    return torch.randn(batch, channels, side, side, device=device)
