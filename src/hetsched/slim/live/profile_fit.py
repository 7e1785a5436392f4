"""Fitting the simulator's device model to measured cells: launch overhead, achieved FLOP/s, knee.

The line ``latency = overhead + FLOPs / achieved FLOP/s`` is fitted in relative error; the knee is
where latency over that line starts to climb steeply with utilisation (the paper's Fig. 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.table import Table

from hetsched.core.devices import DeviceSpec
from hetsched.slim.live.profile_cells import ProfileCell

KNEE_SLOPE_RATIO = 3.0
"""A knee is accepted where latency/line grows this many times faster above it than below."""
KNEE_MIN_SLOWDOWN = 1.25
"""... and where the slowest cell above it takes at least this much longer than the line says."""


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


def fit_table(fit: ProfileFit, name: str) -> Table:
    """The fitted device model of profile ``name`` as a rich table (one field per row)."""
    table = Table(title=f"profile {name}: fitted device model")
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
