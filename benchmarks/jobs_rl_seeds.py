"""RL results over training seeds: mean ± 95 % CI beside the base policies on held-out windows.

Run: ``.venv/bin/python benchmarks/jobs_rl_seeds.py runs/jobs/eval-alibaba [--out DIR]``

Reads the ``evaluation.json`` that ``hetsched jobs evaluate`` wrote for one checkpoint per
training seed (``--checkpoint s0/agent.pt --checkpoint s1/agent.pt ...``, the rows in that order),
all on the same held-out windows. The base policies are deterministic on fixed windows, so each
has one value. For the agent, each seed's mean over the windows is one replicate, and the table
gives the mean and the 95 % confidence half-width over seeds (Student's t,
:func:`hetsched.core.metrics.mean_and_ci95`). It also gives the change against each base policy,
computed per seed and then summarised the same way, and the number of seeds and windows in which
the agent beats that base. Results go to ``--out`` as JSON and CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from hetsched.core.metrics import mean_and_ci95

METRICS = ("wait_s", "bsld", "jct_s")


def _window_means(runs: list[dict[str, float]], metric: str) -> np.ndarray:
    return np.asarray([run[metric] for run in runs], dtype=float)


def summarise(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per base policy (one value) and one for the agent over seeds (mean ± CI), with the
    agent's change against every base (negative = the agent is lower, i.e. better)."""
    bases: dict[str, list[dict[str, float]]] = report["base"]
    seeds = list(report["agents"].values())
    rows: list[dict[str, Any]] = []
    for name, runs in bases.items():
        rows.append({"policy": name, **{m: float(_window_means(runs, m).mean()) for m in METRICS}})
    agent: dict[str, Any] = {"policy": f"RL over {len(seeds)} seeds"}
    for metric in METRICS:
        per_seed = [float(_window_means(runs, metric).mean()) for runs in seeds]
        agent[metric], agent[f"{metric}_ci95"] = mean_and_ci95(per_seed)
        agent[f"{metric}_per_seed"] = per_seed
        for name, base_runs in bases.items():
            base = _window_means(base_runs, metric)
            change = [
                100.0 * (float(_window_means(r, metric).mean()) / base.mean() - 1) for r in seeds
            ]
            mean, half = mean_and_ci95(change)
            agent[f"{metric}_vs_{name}_pct"], agent[f"{metric}_vs_{name}_pct_ci95"] = mean, half
            agent[f"{metric}_vs_{name}_seeds_better"] = int(sum(c < 0 for c in change))
            agent[f"{metric}_vs_{name}_windows_better"] = [
                int(np.sum(_window_means(r, metric) < base)) for r in seeds
            ]
    rows.append(agent)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluation", type=Path, help="Folder of `hetsched jobs evaluate --out`.")
    parser.add_argument("--out", type=Path, default=None, help="Default: the evaluation folder.")
    args = parser.parse_args()
    report = json.loads((args.evaluation / "evaluation.json").read_text())
    rows = summarise(report)
    agent = rows[-1]
    console = Console()
    seeds = len(agent["wait_s_per_seed"])
    windows = len(report["starts"])
    table = Table(title=f"{args.evaluation}: {windows} windows, RL over {seeds} seeds (95 % CI)")
    for column in ("policy", "wait (s)", "BSLD", "JCT (s)", "RL wait vs it", "seeds better"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows[:-1]:
        name = row["policy"]
        change = (
            f"{agent[f'wait_s_vs_{name}_pct']:+.1f} ± {agent[f'wait_s_vs_{name}_pct_ci95']:.1f} %"
        )
        table.add_row(
            name,
            f"{row['wait_s']:,.1f}",
            f"{row['bsld']:.2f}",
            f"{row['jct_s']:,.1f}",
            change,
            f"{agent[f'wait_s_vs_{name}_seeds_better']} / {seeds}",
        )
    table.add_row(
        agent["policy"],
        f"{agent['wait_s']:,.1f} ± {agent['wait_s_ci95']:,.1f}",
        f"{agent['bsld']:.2f} ± {agent['bsld_ci95']:.2f}",
        f"{agent['jct_s']:,.1f} ± {agent['jct_s_ci95']:,.1f}",
        "",
        "",
    )
    console.print(table)
    out = args.out or args.evaluation
    out.mkdir(parents=True, exist_ok=True)
    (out / "seeds.json").write_text(json.dumps(rows, indent=2))
    flat = [{k: v for k, v in row.items() if not isinstance(v, list)} for row in rows]
    with (out / "seeds.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=sorted({k for r in flat for k in r}))
        writer.writeheader()
        writer.writerows(flat)
    console.print(f"saved in {out}: seeds.json, seeds.csv")


if __name__ == "__main__":
    main()
