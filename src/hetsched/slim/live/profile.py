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
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from rich.table import Table

from hetsched.core.devices import DeviceSpec
from hetsched.core.energy import EnergyMeter, best_meter
from hetsched.core.errors import ConfigError
from hetsched.core.nvml import NvmlUnavailableError
from hetsched.core.utilization import CpuUtilization, NvmlUtilization, UtilizationReader
from hetsched.slim.live.torch_backend import (
    device_spec_for,
    random_activations,
    resolve_live_device,
)
from hetsched.slim.model.checkpoint import load_model
from hetsched.slim.model.costs import SegmentCost, compute_cost_table
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, SlimResNet, extract_segment

KNEE_SLOPE_RATIO = 3.0
"""A knee is accepted where latency/line grows this many times faster above it than below."""
KNEE_MIN_SLOWDOWN = 1.25
"""... and where the slowest cell above it takes at least this much longer than the line says."""


@dataclass(frozen=True)
class ProfileCell:
    """One measured (segment, width, batch size); all figures per batch."""

    segment: int
    width: float
    batch_size: int
    flops: int
    latency_s: float
    """The fastest timed forward of all passes: the device undisturbed by other work (the
    estimate ``timeit`` recommends), what the fit and the figures use."""
    latency_median_s: float
    """The median forward of the pass with the lowest median, for comparison."""
    repeats: int
    """Timed forwards of that pass."""
    memory_bytes: int
    memory_source: str
    """``cuda-peak`` (``torch.cuda.max_memory_allocated``) or ``account`` (weights + input +
    output tensors: the CPU has no allocator statistics)."""
    utilization_pct: float | None
    utilization_source: str
    energy_j: float
    energy_source: str


@dataclass(frozen=True)
class ProfileFit:
    """The calibration fitted from the cells."""

    launch_overhead_s: float
    achieved_flops_per_s: float
    achieved_fraction: float
    peak_tflops: float
    median_relative_error: float
    """Of the fitted line over all cells."""
    knee_utilization: float | None
    """None: no bend found (the spec keeps its default)."""
    idle_power_w: float | None
    """Measured before the cells where an energy counter exists; None with the power model."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def utilization_reader(device: torch.device) -> UtilizationReader:
    """NVML on a GPU (error if unreadable); on the CPU, this process's share of the cores,
    read exactly at the ends of each cell's window."""
    if device.type == "cuda":
        try:
            return NvmlUtilization(device.index or 0)
        except NvmlUnavailableError as error:
            raise ConfigError(f"profiling {device} needs NVML utilisation: {error}") from None
    return CpuUtilization("process", min_interval_s=0.0)


def measure_cell(
    module: torch.nn.Module,
    x: torch.Tensor,
    device: torch.device,
    utilization: UtilizationReader,
    meter: EnergyMeter,
    min_time_s: float,
    min_repeats: int = 3,
) -> tuple[float, float, int, float | None, float]:
    """Times forwards of ``module`` on ``x`` for at least ``min_time_s`` and ``min_repeats``.

    Returns:
        (fastest latency s, median latency s, repeats, utilisation % over the window, energy J
        per batch).
    """
    with torch.inference_mode():
        module(x)  # warm-up: first-call allocations and kernel selection
        _sync(device)
        utilization.utilization_pct()  # start the reader's interval here
        start_j = meter.energy_j()
        start_s = time.perf_counter()
        latencies: list[float] = []
        while len(latencies) < min_repeats or time.perf_counter() - start_s < min_time_s:
            began = time.perf_counter()
            module(x)
            _sync(device)
            latencies.append(time.perf_counter() - began)
        utilization_pct = utilization.utilization_pct()
        energy_j = (meter.energy_j() - start_j) / len(latencies)
    return min(latencies), statistics.median(latencies), len(latencies), utilization_pct, energy_j


def _memory_bytes(
    device: torch.device, module_bytes: int, cost: SegmentCost, batch: int, before: int
) -> tuple[int, str]:
    """Memory one batch needs: the CUDA allocator's peak, or the CPU's account of its tensors."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) - before, "cuda-peak"
    tensors = batch * (cost.input_bytes_per_image + cost.activation_bytes_per_image)
    return module_bytes + tensors, "account"


def profile_cells(
    model: SlimResNet,
    device: torch.device,
    batch_sizes: Sequence[int],
    widths: Sequence[float],
    image_size: int,
    utilization: UtilizationReader,
    meter: EnergyMeter,
    min_time_s: float,
    passes: int = 3,
    on_cell: Callable[[ProfileCell], None] | None = None,
) -> list[ProfileCell]:
    """Measures every (segment, width, batch size) on ``device``, ``passes`` times round-robin.

    A cell keeps its fastest forward over all passes, and the other figures of its least
    disturbed pass (lowest median): on a shared machine another job's burst then spoils one pass
    of a cell, not the cell (every pass would fall into the same burst if they ran back to back).
    """
    costs = compute_cost_table(model.num_classes, image_size, model.widths)
    instances = {}
    for segment in range(NUM_SEGMENTS):
        for width in widths:
            module = extract_segment(model, segment, width).to(device).eval()
            module_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
            instances[segment, width] = (module, module_bytes)
    keys = [(k, w, b) for k in range(NUM_SEGMENTS) for w in widths for b in batch_sizes]
    samples: dict[tuple[int, float, int], list[tuple]] = {key: [] for key in keys}
    for _ in range(passes):
        for segment, width, batch in keys:
            module, module_bytes = instances[segment, width]
            cost = costs.get(segment, width, None if segment == 0 else width)
            x = random_activations(segment, width, batch, image_size, device)
            before = 0
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                before = torch.cuda.memory_allocated(device) - module_bytes - x.nbytes
            measured = measure_cell(module, x, device, utilization, meter, min_time_s)
            memory = _memory_bytes(device, module_bytes, cost, batch, before)
            samples[segment, width, batch].append((*measured, *memory))
    cells = []
    for (segment, width, batch), runs in samples.items():
        fastest = min(runs, key=lambda r: r[1])  # the pass with the lowest median
        _, median_s, repeats, util, energy_j, memory, memory_source = fastest
        cost = costs.get(segment, width, None if segment == 0 else width)
        cell = ProfileCell(
            segment=segment,
            width=float(width),
            batch_size=batch,
            flops=cost.flops_per_image * batch,
            latency_s=min(r[0] for r in runs),
            latency_median_s=median_s,
            repeats=repeats,
            memory_bytes=int(memory),
            memory_source=memory_source,
            utilization_pct=util,
            utilization_source=utilization.source,
            energy_j=energy_j,
            energy_source=meter.source,
        )
        cells.append(cell)
        if on_cell is not None:
            on_cell(cell)
    return cells


def fit_line(flops: np.ndarray, latency_s: np.ndarray) -> tuple[float, float]:
    """(overhead s, s per FLOP) of ``latency = overhead + flops x s_per_flop`` in relative error.

    Dividing each row by its latency makes every cell count by its relative error, so a 0.3 ms
    batch weighs as much as a 300 ms one (otherwise the big batches alone would set the line).
    A negative intercept is not physical: then the line through the origin is fitted.
    """
    a = np.stack([1.0 / latency_s, flops / latency_s], axis=1)
    (overhead_s, s_per_flop), *_ = np.linalg.lstsq(a, np.ones_like(latency_s), rcond=None)
    if overhead_s < 0:
        ratio = flops / latency_s
        overhead_s, s_per_flop = 0.0, float(ratio.sum() / (ratio**2).sum())
    return float(overhead_s), float(s_per_flop)


def find_knee(utilization_pct: np.ndarray, slowdown: np.ndarray) -> float | None:
    """The utilisation (0-1) where ``slowdown`` bends upward (the paper's Fig. 3), or None.

    Two lines are fitted, below and above each candidate break (at least 3 cells each side); the
    best split is a knee if the upper slope is :data:`KNEE_SLOPE_RATIO` times the lower one and
    the slowest cell above it is :data:`KNEE_MIN_SLOWDOWN` over the fitted latency.
    """
    order = np.argsort(utilization_pct)
    u, s = utilization_pct[order], slowdown[order]
    best: tuple[float, int, float, float] | None = None
    for split in range(3, len(u) - 2):
        if u[split] == u[split - 1] or np.ptp(u[:split]) == 0 or np.ptp(u[split:]) == 0:
            continue
        low = np.polyfit(u[:split], s[:split], 1, full=True)
        high = np.polyfit(u[split:], s[split:], 1, full=True)
        sse = float(sum(r[0] if len(r) else 0.0 for r in (low[1], high[1])))
        if best is None or sse < best[0]:
            best = (sse, split, float(low[0][0]), float(high[0][0]))
    if best is None:
        return None
    _, split, low_slope, high_slope = best
    if high_slope <= KNEE_SLOPE_RATIO * max(low_slope, 1e-6) or s[split:].max() < KNEE_MIN_SLOWDOWN:
        return None
    return float(min(max(u[split] / 100.0, 0.5), 0.99))


def fit_profile(cells: Sequence[ProfileCell], base: DeviceSpec, idle_power_w: float | None):
    """The :class:`ProfileFit` of ``cells`` against the datasheet ``base``."""
    flops = np.array([c.flops for c in cells], dtype=float)
    latency_s = np.array([c.latency_s for c in cells])
    overhead_s, s_per_flop = fit_line(flops, latency_s)
    achieved = 1.0 / s_per_flop
    predicted = overhead_s + flops * s_per_flop
    # A measured rate above the datasheet peak means the peak was wrong; the peak follows it.
    peak_tflops = max(base.peak_tflops, achieved / 1e12)
    measured = [c.utilization_pct is not None for c in cells]
    knee = None
    if all(measured):
        util = np.array([c.utilization_pct for c in cells], dtype=float)
        knee = find_knee(util, latency_s / predicted)
    return ProfileFit(
        launch_overhead_s=overhead_s,
        achieved_flops_per_s=achieved,
        achieved_fraction=achieved / (peak_tflops * 1e12),
        peak_tflops=peak_tflops,
        median_relative_error=float(np.median(np.abs(predicted - latency_s) / latency_s)),
        knee_utilization=knee,
        idle_power_w=idle_power_w,
    )


def fitted_spec(base: DeviceSpec, fit: ProfileFit, name: str, source: str) -> DeviceSpec:
    """``base`` with the fitted calibration fields."""
    update = {
        "name": name,
        "peak_tflops": fit.peak_tflops,
        "achieved_fraction": min(fit.achieved_fraction, 1.0),
        "launch_overhead_s": fit.launch_overhead_s,
        "source": source,
    }
    if fit.knee_utilization is not None:
        update["knee_utilization"] = fit.knee_utilization
    if fit.idle_power_w is not None:
        update["idle_power_w"] = min(fit.idle_power_w, base.max_power_w)
    return base.model_copy(update=update)


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


def fit_table(result: ProfileResult) -> Table:
    """The fitted device model of a profile as a rich table (one field per row)."""
    fit = result.fit
    table = Table(title=f"profile {result.spec.name}: fitted device model")
    table.add_column("field")
    table.add_column("value", justify="right")
    knee = "not measurable" if fit.knee_utilization is None else f"{fit.knee_utilization:.2f}"
    for field, value in (
        ("launch overhead", f"{1e3 * fit.launch_overhead_s:.3f} ms"),
        ("achieved throughput", f"{fit.achieved_flops_per_s / 1e9:.0f} GFLOP/s"),
        (
            "achieved fraction of peak",
            f"{fit.achieved_fraction:.3f} of {fit.peak_tflops:g} TFLOP/s",
        ),
        ("median |relative error| of the fit", f"{100 * fit.median_relative_error:.1f} %"),
        ("knee utilisation", knee),
    ):
        table.add_row(field, value)
    return table


def describe_cell(cell: ProfileCell) -> str:
    """One measured cell as a progress line (latency and achieved GFLOP/s)."""
    return (
        f"  segment {cell.segment + 1} width {cell.width:g}: batch {cell.batch_size}"
        f" {1e3 * cell.latency_s:.2f} ms, {cell.flops / cell.latency_s / 1e9:.0f} GFLOP/s"
    )
