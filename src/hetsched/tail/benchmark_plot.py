"""Fig. 2 of the paper for our runs: AVG_NP90 per node and scorer, averaged over seeds."""

from __future__ import annotations

import numpy as np

from hetsched.tail.placement import SCORERS
from hetsched.tail.scoring import EXTENDER_WEIGHT


def plot_avg_np90(report: dict, path, title: str) -> None:
    """Fig. 2-style bars: AVG_NP90 per node (``report["nodes"]``) for each scorer, averaged over
    seeds; ``title`` says what the nodes carried (simulated background or this machine's load)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = report["nodes"]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.8 / len(SCORERS)  # the scorers' bars side by side fill 80 % of a node's slot
    labels = {
        "default": "default kube scoring",
        "least-loaded": "least-loaded (run queue per core)",
        "load-risk": "LoadVariationRiskBalancing-style",
        "target-load": "TargetLoadPacking-style (40 %)",
        "p90": "predicted P90 of the pod (paper)",
        "p90-node": "predicted P90 incl. neighbours (ours)",
        "default+extender": f"default + paper's P90 as extender (weight {EXTENDER_WEIGHT})",
    }
    for j, scorer in enumerate(SCORERS):
        vals = []
        for name in names:
            got = [
                r[scorer]["avg_np90_s"][name]
                for r in report["seeds"]
                if name in r[scorer]["avg_np90_s"]
            ]
            vals.append(1e3 * float(np.mean(got)) if got else 0.0)
        offset = (j - (len(SCORERS) - 1) / 2) * width
        ax.bar(np.arange(len(names)) + offset, vals, width, label=labels[scorer])
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("AVG_NP90 (ms), mean over seeds")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.5)  # headroom, so the legend sits above the bars
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
