"""The paper's Figs 1-3 redrawn from a device profile (:mod:`hetsched.slim.live.profile_cells`).

Fig. 1: memory vs batch size, one panel per segment, one line per width. Fig. 2: energy per batch
vs utilisation. Fig. 3: latency per batch vs utilisation. Colours are segments, marker sizes grow
with the width; every title names where its figures come from (an estimated energy says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hetsched.slim.live.profile_cells import ProfileCell
from hetsched.slim.model.slimresnet import NUM_SEGMENTS

DPI = 80
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def _scatter(ax, cells: Sequence[ProfileCell], y_of, ylabel: str) -> None:
    for segment in range(NUM_SEGMENTS):
        mine = [c for c in cells if c.segment == segment and c.utilization_pct is not None]
        ax.scatter(
            [c.utilization_pct for c in mine],
            [y_of(c) for c in mine],
            s=[12 + 40 * c.width for c in mine],
            color=COLORS[segment],
            alpha=0.7,
            label=f"segment {segment + 1}",
        )
    ax.set_xlabel(f"utilisation % ({cells[0].utilization_source})")
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plot_profile(
    cells: Sequence[ProfileCell], out_dir: Path, name: str, energy_source: str
) -> list[Path]:
    """Writes ``NAME-fig1-memory.png``, ``NAME-fig2-energy.png``, ``NAME-fig3-latency.png``.

    Returns:
        The three paths.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    paths = [
        out_dir / f"{name}-fig{i}-{what}.png"
        for i, what in ((1, "memory"), (2, "energy"), (3, "latency"))
    ]

    fig, axes = plt.subplots(1, NUM_SEGMENTS, figsize=(11, 2.8))
    for segment, ax in enumerate(axes):
        mine = [c for c in cells if c.segment == segment]
        for width in sorted({c.width for c in mine}):
            line = sorted((c.batch_size, c.memory_bytes / 2**20) for c in mine if c.width == width)
            ax.plot(*zip(*line, strict=True), marker="o", markersize=3, label=f"w={width:g}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"segment {segment + 1}", fontsize=9)
        ax.set_xlabel("batch size")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"memory MiB ({cells[0].memory_source})")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{name}: memory vs batch size (paper Fig. 1)", fontsize=10)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=DPI)
    plt.close(fig)

    estimated = ", ESTIMATED: no counter" if energy_source == "power-model" else ""
    for path, y_of, ylabel, title in (
        (
            paths[1],
            lambda c: c.energy_j,
            "energy per batch, J",
            f"energy vs utilisation (paper Fig. 2)\nenergy source: {energy_source}{estimated}",
        ),
        (
            paths[2],
            lambda c: 1e3 * c.latency_s,
            "latency per batch, ms",
            "latency vs utilisation (paper Fig. 3)\nfastest forward of each cell",
        ),
    ):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        _scatter(ax, cells, y_of, ylabel)
        ax.set_title(f"{name}: {title}", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
    return paths
