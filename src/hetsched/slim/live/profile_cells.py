"""Measuring one device cell by cell: each (segment, width, batch size) timed, sized and metered.

The cells are what :mod:`hetsched.slim.live.profile_fit` fits the simulator's device model to and
what :mod:`hetsched.slim.live.profile_plots` redraws as the paper's Figs 1-3.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from hetsched.core.energy import EnergyMeter
from hetsched.core.errors import ConfigError
from hetsched.core.nvml import NvmlUnavailableError
from hetsched.core.utilization import CpuUtilization, NvmlUtilization, UtilizationReader
from hetsched.slim.live.devices import random_activations
from hetsched.slim.model.costs import SegmentCost, compute_cost_table
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, SlimResNet, extract_segment


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


def describe_cell(cell: ProfileCell) -> str:
    """One measured cell as a progress line (latency and achieved GFLOP/s)."""
    return (
        f"  segment {cell.segment + 1} width {cell.width:g}: batch {cell.batch_size}"
        f" {1e3 * cell.latency_s:.2f} ms, {cell.flops / cell.latency_s / 1e9:.0f} GFLOP/s"
    )
