"""Figures of a policy comparison: the wait-time CDF (the paper's Fig. 12 view) and GPU
utilisation over time.

matplotlib is imported inside each function (with the file-only ``Agg`` backend), so modules that
compare policies import without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.windows import WindowSummary


def plot_wait_cdf(summaries: Sequence[WindowSummary], path: Path) -> None:
    """Wait-time CDF per policy and queue mode, log time axis (waits under 1 s shown at 1 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    palette = plt.get_cmap("tab20")
    ax.set_prop_cycle(color=[palette(i) for i in range(20)])  # 20 distinct policy/mode lines
    for summary in summaries:
        waits = np.sort(np.maximum(summary.waits_s, 1.0))
        if len(waits):
            fraction = np.arange(1, len(waits) + 1) / len(waits)
            ax.plot(waits, fraction, label=f"{summary.policy}/{summary.queue_mode}")
    ax.set_xscale("log")
    ax.set_xlabel("wait time (s, values < 1 s shown at 1 s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_utilisation(results: Mapping[str, SimulationResult], path: Path) -> None:
    """Busy GPUs / cluster GPUs over time, one step line per labelled run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, result in results.items():
        hours = (result.utilisation_time_s - result.utilisation_time_s[0]) / 3600.0
        share = 100.0 * result.utilisation_busy_gpus / result.cluster.total_gpus
        ax.step(hours, share, where="post", label=label, linewidth=0.8)
    ax.set_xlabel("time since first arrival (h)")
    ax.set_ylabel("GPUs busy (%)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
