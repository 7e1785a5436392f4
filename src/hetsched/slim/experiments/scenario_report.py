"""Results of the scenario evaluation: mean ± 95 % CI over seeds, tables, CSV, Pareto plots.

For every (scenario, router) the runs of the seeds are reduced to mean and the half-width of a
95 % Student-t confidence interval of each figure. A router that was unstable on any seed (its
queues grow without bound, :mod:`hetsched.slim.experiments.slo_metrics`) shows ``unstable``
instead of a latency, since its latency only measures how long the run was.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from hetsched.slim.experiments.slo_metrics import WindowMetrics

FIGURES = (
    "accuracy_pct",
    "slo_attainment",
    "goodput_per_s",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p99_s",
    "energy_per_image_j",
)
"""The per-run figures aggregated over seeds."""

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
"""97.5 % quantiles of Student's t for 1..30 degrees of freedom (two-sided 95 % intervals)."""
Z_975 = 1.960
"""The normal quantile used beyond 30 degrees of freedom."""


def ci95_half_width(values: list[float]) -> float:
    """Half-width of the 95 % confidence interval of the mean (NaN for fewer than 2 values)."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return math.nan
    df = len(finite) - 1
    quantile = T_975[df - 1] if df <= len(T_975) else Z_975
    return quantile * float(np.std(finite, ddof=1)) / math.sqrt(len(finite))


@dataclass
class RouterResult:
    """One router on one scenario: its runs (one per seed) and their aggregate."""

    router: str
    runs: list[WindowMetrics] = field(default_factory=list)

    @property
    def unstable_seeds(self) -> int:
        """Seeds on which the router's queues grew without bound."""
        return sum(run.unstable for run in self.runs)

    def figure(self, name: str) -> tuple[float, float]:
        """(mean, 95 % CI half-width) of figure ``name`` over the seeds."""
        values = [float(getattr(run, name)) for run in self.runs]
        finite = [v for v in values if math.isfinite(v)]
        mean = float(np.mean(finite)) if finite else math.nan
        return mean, ci95_half_width(values)

    def widths(self, executed: bool) -> dict[str, float]:
        """Mean share of segments per width over the seeds (requested or executed)."""
        shares = [run.executed_widths if executed else run.requested_widths for run in self.runs]
        keys = sorted({key for share in shares for key in share}, key=float)
        return {key: float(np.mean([share.get(key, 0.0) for share in shares])) for key in keys}

    def as_dict(self) -> dict[str, Any]:
        """Aggregate and runs, for JSON."""
        aggregate = {}
        for name in FIGURES:
            mean, half_width = self.figure(name)
            aggregate[name] = {"mean": mean, "ci95": half_width}
        return {
            "router": self.router,
            "seeds": len(self.runs),
            "unstable_seeds": self.unstable_seeds,
            **aggregate,
            "requested_widths": self.widths(executed=False),
            "executed_widths": self.widths(executed=True),
            "runs": [run.as_dict() for run in self.runs],
        }


@dataclass
class ScenarioResult:
    """Every router's results on one scenario."""

    scenario: str
    held_out: bool
    description: str
    routers: dict[str, RouterResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Routers not run here, with the reason (e.g. a learned router without a checkpoint)."""

    def as_dict(self) -> dict[str, Any]:
        """For JSON."""
        return {
            "scenario": self.scenario,
            "held_out": self.held_out,
            "description": self.description,
            "routers": {name: result.as_dict() for name, result in self.routers.items()},
            "skipped": self.skipped,
        }


def _cell(result: RouterResult, name: str, scale: float = 1.0, digits: int = 1) -> str:
    mean, half_width = result.figure(name)
    if not math.isfinite(mean):
        return "-"
    ci = f" ± {half_width * scale:.{digits}f}" if math.isfinite(half_width) else ""
    return f"{mean * scale:.{digits}f}{ci}"


def scenario_table(result: ScenarioResult) -> Table:
    """One rich table per scenario: a router per row, mean ± 95 % CI per figure."""
    mark = " (HELD OUT)" if result.held_out else ""
    table = Table(title=f"{result.scenario}{mark}: {result.description}")
    columns = ("router", "SLO att. %", "accuracy %", "p50 ms", "p99 ms", "J/image", "goodput/s")
    for column in columns:
        table.add_column(column, justify="left" if column == "router" else "right")
    for name, router in result.routers.items():
        unstable = router.unstable_seeds
        latency = (
            [f"unstable ({unstable}/{len(router.runs)})"] * 2
            if unstable
            else [_cell(router, "latency_p50_s", 1e3), _cell(router, "latency_p99_s", 1e3)]
        )
        table.add_row(
            name,
            _cell(router, "slo_attainment", 100.0),
            _cell(router, "accuracy_pct", 1.0, 2),
            *latency,
            _cell(router, "energy_per_image_j", 1.0, 3),
            _cell(router, "goodput_per_s", 1.0, 0),
        )
    return table


def write_csv(results: list[ScenarioResult], path: Path) -> None:
    """One row per (scenario, router): mean and CI half-width of every figure."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        header = ["scenario", "held_out", "router", "seeds", "unstable_seeds"]
        header += [f"{name}_{part}" for name in FIGURES for part in ("mean", "ci95")]
        writer.writerow(header)
        for scenario in results:
            for name, router in scenario.routers.items():
                row: list[Any] = [
                    scenario.scenario,
                    scenario.held_out,
                    name,
                    len(router.runs),
                    router.unstable_seeds,
                ]
                for figure in FIGURES:
                    row += list(router.figure(figure))
                writer.writerow(row)


def pareto_front(points: dict[str, tuple[float, float]]) -> set[str]:
    """Names whose (x, y) no other point matches or beats in both with one strictly better."""
    front = set()
    for name, (x, y) in points.items():
        dominated = any(
            ox >= x and oy >= y and (ox > x or oy > y)
            for other, (ox, oy) in points.items()
            if other != name
        )
        if not dominated and math.isfinite(x) and math.isfinite(y):
            front.add(name)
    return front


def plot_pareto(result: ScenarioResult, path: Path) -> None:
    """Accuracy against SLO attainment, one point per router with its 95 % CIs; the Pareto
    front is drawn and labelled in bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = {
        name: (router.figure("slo_attainment")[0] * 100.0, router.figure("accuracy_pct")[0])
        for name, router in result.routers.items()
    }
    front = pareto_front(points)
    fig, axis = plt.subplots(figsize=(6.4, 4.4))
    for name, router in result.routers.items():
        (x, y) = points[name]
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        x_ci = router.figure("slo_attainment")[1] * 100.0
        y_ci = router.figure("accuracy_pct")[1]
        axis.errorbar(
            x,
            y,
            xerr=x_ci if math.isfinite(x_ci) else None,
            yerr=y_ci if math.isfinite(y_ci) else None,
            fmt="o" if name in front else "s",
            capsize=3,
            color="tab:red" if name in front else "tab:gray",
        )
        axis.annotate(
            name, (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points",
            fontweight="bold" if name in front else "normal",
        )  # fmt: skip
    ordered = sorted((points[name] for name in front), key=lambda point: point[0])
    if len(ordered) > 1:
        axis.plot(*zip(*ordered, strict=True), color="tab:red", linewidth=1, alpha=0.6)
    mark = " (held out)" if result.held_out else ""
    axis.set_title(f"{result.scenario}{mark}: accuracy vs SLO attainment", fontsize=10)
    axis.set_xlabel("SLO attainment (%)")
    axis.set_ylabel("top-1 accuracy (%)")
    axis.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
