"""The learned router's learning curve: validation score against fine-tuning decisions.

One row per validation (after cloning, then after every PPO chunk), written as CSV and plotted
beside each advisor rule's validation score, so the plot says at a glance whether fine-tuning ever
got above the rules (and the saved router is the best point of the curve).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hetsched.slim.router_training.validation import ACCURACY_WEIGHT, EpisodeScore

PANELS = (
    ("score", f"validation score (attainment + {ACCURACY_WEIGHT:g} x accuracy)"),
    ("slo_attainment", "SLO attainment"),
    ("accuracy", "accuracy"),
)


def write_curves(
    history: list[dict[str, Any]], references: dict[str, dict[str, float]], stem: Path
) -> None:
    """Writes ``<stem>.csv`` (every history row) and ``<stem>.png`` (the panels above)."""
    columns: list[str] = []
    for row in history:
        columns += [key for key in row if key not in columns]
    with stem.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(history)
    plot_curves(history, references, stem.with_suffix(".png"))


def plot_curves(
    history: list[dict[str, Any]], references: dict[str, dict[str, float]], path: Path
) -> None:
    """Validation panels against fine-tuning decisions, the advisors as dashed lines (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    decisions = [row["decisions"] for row in history]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.5 * len(PANELS), 3.4))
    for axis, (key, label) in zip(axes, PANELS, strict=True):
        axis.plot(decisions, [row[key] for row in history], marker="o", label="learned")
        for name, reference in references.items():
            value = EpisodeScore(**reference).score if key == "score" else reference[key]
            axis.axhline(value, linestyle="--", linewidth=0.8, label=name)
        axis.set_xlabel("PPO decisions after cloning")
        axis.set_title(label, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
