"""``hetsched slim profile``: measure a real device and fit the simulator's device model to it.

For every (segment, width, batch size) the standalone instance a server would load
(:func:`~hetsched.slim.model.slimresnet.extract_segment`, previous width = width) runs repeatedly
for a short window; each cell records the median latency, the memory the batch needs, the device's
utilisation over the window and the energy per batch, each with its source. From those cells the
calibration fields of a :class:`~hetsched.core.devices.DeviceSpec` are fitted:

* ``launch_overhead_s`` and ``achieved_fraction``: the line ``latency = overhead + FLOPs /
  achieved FLOP/s`` (FLOPs from :mod:`hetsched.slim.model.costs`), fitted to relative error so that
  the small batches, which are mostly overhead, pin the intercept and the large ones the slope;
* ``knee_utilization``: where latency over that line starts to climb steeply with utilisation
  (the paper's Fig. 3), if the cells show such a bend; otherwise the datasheet default stays and
  the profile says it was not measurable.

The profile JSON is ``{"device": DeviceSpec fields, "fit": ..., "measurements": [...]}``, which
:func:`~hetsched.core.devices.load_device` loads, so the simulated backend can model the measured
device. :mod:`hetsched.slim.live.profile_plots` redraws the paper's Figs 1-3 from the cells: memory
vs batch size per segment, energy vs utilisation, latency vs utilisation.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch

from hetsched.core.devices import DeviceSpec
from hetsched.core.energy import EnergyMeter, best_meter
from hetsched.core.errors import ConfigError
from hetsched.slim.live.devices import device_spec_for, resolve_live_device
from hetsched.slim.live.profile_cells import ProfileCell, profile_cells, utilization_reader
from hetsched.slim.live.profile_fit import ProfileFit, fit_profile, fitted_spec
from hetsched.slim.model.checkpoint import load_model
from hetsched.slim.model.slimresnet import SlimResNet


def measure_idle_power_w(meter: EnergyMeter, seconds: float) -> float | None:
    """Mean power over ``seconds`` of doing nothing, where a counter measures it."""
    if meter.source == "power-model":
        return None
    meter.power_w()
    time.sleep(seconds)
    return meter.power_w()


@dataclass(frozen=True)
class ProfileResult:
    """A finished profile: the fitted device, its fit and cells, and where the JSON went."""

    spec: DeviceSpec
    fit: ProfileFit
    cells: list[ProfileCell]
    energy_source: str
    """Where the energy figures come from (``nvml``, ``rapl``, ``power-model``)."""
    energy_explanation: str
    json_path: Path


def run_profile(
    model: SlimResNet,
    device: str,
    batch_sizes: Sequence[int],
    widths: Sequence[float],
    out_dir: Path,
    *,
    name: str | None = None,
    image_size: int = 32,
    min_time_s: float = 0.2,
    passes: int = 3,
    idle_s: float = 1.0,
    on_cell: Callable[[ProfileCell], None] | None = None,
) -> ProfileResult:
    """Profiles ``device`` and writes ``OUT/NAME.json``; returns all of it.

    The figures are drawn beside it, from the result, by
    :func:`~hetsched.slim.live.profile_plots.plot_profile`.

    Raises:
        ConfigError: For a bad device, a width the model lacks, a non-positive batch size or
            pass count.
    """
    torch_device = resolve_live_device(device)
    bad = [w for w in widths if float(w) not in model.widths]
    if bad:
        raise ConfigError(f"--widths: {bad} not among the model's widths {model.widths}")
    if not batch_sizes or min(batch_sizes) < 1:
        raise ConfigError(f"--batch-sizes: expected positive integers, got {list(batch_sizes)}")
    if passes < 1:
        raise ConfigError(f"--passes: expected at least 1, got {passes}")
    model = model.to(torch_device).eval()
    base = device_spec_for(torch_device)
    threads = torch.get_num_threads()
    name = name or (f"cpu-{threads}core" if torch_device.type == "cpu" else base.name)
    utilization = utilization_reader(torch_device)
    meter_utilization = utilization_reader(torch_device)
    meter = best_meter(str(torch_device), base, meter_utilization)
    idle_power_w = measure_idle_power_w(meter, idle_s)
    cells = profile_cells(
        model,
        torch_device,
        batch_sizes,
        widths,
        image_size,
        utilization,
        meter,
        min_time_s,
        passes,
        on_cell,
    )
    fit = fit_profile(cells, base, idle_power_w)
    machine = (
        torch.cuda.get_device_name(torch_device)
        if torch_device.type == "cuda"
        else (platform.processor() or platform.machine())
    )
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    source = f"profile of {torch_device} ({machine}, {threads} torch threads), {when}"
    spec = fitted_spec(base, fit, name, source)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{name}.json"
    json_path.write_text(
        json.dumps(
            {
                "device": spec.model_dump(),
                "fit": asdict(fit),
                "energy": {"source": meter.source, "explanation": meter.explanation},
                "setup": {
                    "device": str(torch_device),
                    "machine": machine,
                    "torch": torch.__version__,
                    "torch_threads": threads,
                    "image_size": image_size,
                    "num_classes": model.num_classes,
                    "min_time_s": min_time_s,
                    "passes": passes,
                    "datasheet": base.name,
                },
                "measurements": [asdict(c) for c in cells],
            },
            indent=1,
        )
    )
    return ProfileResult(spec, fit, cells, meter.source, meter.explanation, json_path)


def model_to_profile(checkpoint: Path | None) -> SlimResNet:
    """The trained model in ``checkpoint``, or seeded random weights (latency does not care)."""
    if checkpoint is not None:
        return load_model(checkpoint)
    torch.manual_seed(0)
    return SlimResNet(num_classes=10)
