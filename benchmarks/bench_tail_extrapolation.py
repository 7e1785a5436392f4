"""Tail: does a regressor rank nodes larger than its training grid sensibly?

Run: ``.venv/bin/python benchmarks/bench_tail_extrapolation.py [--data CSV] [--cores 1,2,4,8,16]``

Trains every registered regressor on a measured grid (by default the 2-core sandbox's, whose
nodes have one or two cores), then predicts each zoo model's P90 on idle nodes of ``--cores``
cores at ``--freq-ghz``, once with the inputs clamped to the training range (what the
regressors do) and once without (the estimator alone, extrapolating). A node with more cores
should never be predicted slower than one with fewer; the table counts such inversions per
regressor and model, and the largest ratio slower/faster among them. Results go to ``--out``
(JSON).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from hetsched.tail.catalog_build import build_catalog
from hetsched.tail.dataset import load_csv
from hetsched.tail.regressors import REGRESSORS, FittedRegressor
from hetsched.tail.zoo import MODELS

DEFAULT_DATA = Path("src/hetsched/tail/data/measured-2core.csv")


def node_rows(model: dict, cores: list[int], freq_ghz: float) -> list[dict]:
    """One idle node of each core count (eq. 8 with no contention) for ``model``."""
    return [{**model, "cpu_eff": float(c), "freq_eff_ghz": freq_ghz} for c in cores]


def ties(p90_s: np.ndarray) -> int:
    """Neighbouring node sizes predicted the same P90 (the clamp's price: no ranking there)."""
    return int(np.sum(np.isclose(p90_s[1:], p90_s[:-1], rtol=1e-9, atol=0.0)))


def inversions(p90_s: np.ndarray) -> tuple[int, float]:
    """Pairs (fewer cores, more cores) where the larger node is predicted slower, and the worst
    ratio of the larger node's P90 over the smaller one's (1.0 when none)."""
    count, worst = 0, 1.0
    for i in range(len(p90_s)):
        for j in range(i + 1, len(p90_s)):
            if p90_s[j] > p90_s[i] * (1 + 1e-9):
                count += 1
                worst = max(worst, float(p90_s[j] / p90_s[i]))
    return count, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="measured grid (CSV)")
    parser.add_argument("--cores", default="1,2,4,8,16", help="node sizes to rank, cores")
    parser.add_argument("--freq-ghz", type=float, default=2.3, help="the nodes' clock")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/tail_extrapolation.json"))
    args = parser.parse_args()
    cores = [int(c) for c in args.cores.split(",")]
    rows = load_csv(args.data)
    catalog = build_catalog(sorted(MODELS))
    models = {key: catalog.models[key].model_dump() for key in catalog.model_keys()}
    console = Console()
    results: list[dict[str, Any]] = []
    for name in REGRESSORS.names():
        fitted = FittedRegressor(name, REGRESSORS.create(name, seed=args.seed)).fit(rows)
        trained = fitted.node_range()
        for clamped in (True, False):
            model = FittedRegressor(
                name, fitted.estimator, input_range=fitted.input_range if clamped else None
            )
            for key, features in models.items():
                p90_s = model.predict_p90_s(node_rows(features, cores, args.freq_ghz))
                count, worst = inversions(p90_s)
                results.append(
                    {
                        "regressor": name,
                        "clamped": clamped,
                        "model": key,
                        "p90_ms": [round(float(v) * 1e3, 3) for v in p90_s],
                        "inversions": count,
                        "ties": ties(p90_s),
                        "worst_ratio": worst,
                        "trained_node_range": trained,
                    }
                )
    table = Table(title=f"Inversions over {len(models)} models, nodes of {args.cores} cores")
    columns = ("regressor", "inputs", "models with an inversion", "inversions", "worst", "ties")
    for column in columns:
        table.add_column(column)
    for name in REGRESSORS.names():
        for clamped in (True, False):
            mine = [r for r in results if r["regressor"] == name and r["clamped"] == clamped]
            table.add_row(
                name,
                "clamped" if clamped else "extrapolated",
                f"{sum(r['inversions'] > 0 for r in mine)} / {len(mine)}",
                str(sum(r["inversions"] for r in mine)),
                f"{max(r['worst_ratio'] for r in mine):.3g}x",
                f"{sum(r['ties'] for r in mine)} / {len(mine) * (len(cores) - 1)}",
            )
    console.print(table)
    console.print(f"trained node range (cpu_eff, freq_eff_ghz): {results[0]['trained_node_range']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"data": str(args.data), "cores": cores, "rows": results}))
    console.print(f"results: {args.out}")


if __name__ == "__main__":
    main()
