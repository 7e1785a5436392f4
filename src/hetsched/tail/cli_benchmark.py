"""`hetsched tail benchmark`: the paper's placement experiment against every baseline, on seeds
drawn when it starts (registered on the tail app by :mod:`hetsched.tail.cli`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.benchmark import (
    PACKAGED_MEASURED,
    draw_seeds,
    fresh_master_seed,
    load_measured,
    run_benchmark,
)
from hetsched.tail.benchmark_plot import plot_avg_np90
from hetsched.tail.harness import parse_node_specs
from hetsched.tail.live_benchmark import run_live_benchmark
from hetsched.tail.live_nodes import resolve_nodes
from hetsched.tail.placement import SCORERS
from hetsched.tail.regressors import REGRESSORS, ModelRepository
from hetsched.tail.sim_cluster import parse_background
from hetsched.tail.tables import rich_table

console = Console()


def _live(
    repo: Path | None, live_nodes: str, live_models: str, seeds: list[int], settings: dict[str, Any]
) -> tuple[dict, str]:
    """The pods run on this machine's emulated nodes; the report and its plot title."""
    if repo is None:
        raise HetschedError(
            "--live needs --repo: a model repository `hetsched tail train` wrote from this "
            "machine's harness data (the P90 scorers predict with its latest version)"
        )
    try:
        regressor, meta = ModelRepository(repo).load()
    except DataError as error:
        raise HetschedError(f"--repo: {error}") from None
    try:
        given = parse_node_specs(live_nodes) if live_nodes else None
    except HetschedError as error:
        raise HetschedError(f"--live-nodes: {error}") from None
    nodes = resolve_nodes(given, os.sched_getaffinity(0))
    models = [m.strip() for m in live_models.split(",") if m.strip()]
    report = run_live_benchmark(regressor, nodes, models, seeds, **settings)
    report["model_version"] = meta["version"]
    load = report["load_avg_after"][0]
    return (
        report,
        f"live on this machine, {settings['queries']} queries per pod, load avg {load:.1f}",
    )


def _print(report: dict, slo_ms: float | None, out: Path) -> None:
    """Each scorer's means over seeds, then every paired difference with its interval."""
    s = report["summary"]
    means = [
        {
            "scorer": name,
            "mean AVG_NP90 ms": 1e3 * s[name]["mean_avg_np90"],
            "mean pod P90 ms": 1e3 * s[name]["mean_pod_p90"],
            **({"SLO viol.": s[name]["slo_violation_rate"]} if slo_ms else {}),
        }
        for name in SCORERS
    ]
    console.print(
        rich_table(f"AVG_NP90 (eq. 16) over {len(report['seeds'])} seeds", means, list(means[0]))
    )
    for metric, label in (("mean_avg_np90_s", "AVG_NP90"), ("mean_pod_p90_s", "mean pod P90")):
        paired = []
        for name in SCORERS:
            entry = s[name]["paired"][metric]
            pairs = list(entry["vs"].items())
            if "vs_best_baseline" in entry:
                best = entry["vs_best_baseline"]
                pairs.append((f"best baseline ({best['baseline']})", best))
            for baseline, d in pairs:
                paired.append(
                    {
                        "scorer": name,
                        "minus": baseline,
                        "mean ms": 1e3 * d["mean"],
                        "95 % CI ms": f"[{1e3 * d['low']:+.1f}, {1e3 * d['high']:+.1f}]",
                        "win/tie/loss": f"{d['wins']}/{d['ties']}/{d['losses']}",
                    }
                )
        title = f"Paired {label} differences (negative: scorer better)"
        console.print(rich_table(title, paired, list(paired[0])))
    if "load_avg_before" in report:
        before, after = report["load_avg_before"][0], report["load_avg_after"][0]
        console.print(f"this machine's 1-min load average: {before:.2f} before, {after:.2f} after")
    console.print(f"report and plot in {out}")


def benchmark(
    measured: Path = typer.Option(
        None, help="Harness CSV to calibrate (default: the committed measured-2core-quiet.csv)."
    ),
    runs: int = typer.Option(100, min=1, help="Seeds to run, drawn from the master seed."),
    seed: int = typer.Option(
        None, help="Master seed to reproduce a run (default: drawn now and printed)."
    ),
    pods: int = typer.Option(10, min=1, help="Pods placed one after another."),
    queries: int = typer.Option(1024, min=1, help="Single-stream queries per pod."),
    slo_ms: float = typer.Option(0.0, help="P90 target for the SLO-violation rate (0: off)."),
    objective: str = typer.Option("avg_np90", help="p90-node cost: 'avg_np90' or 'sum'."),
    background: str = typer.Option(
        "0,0",
        help="lo,hi: best-effort load per node, a fraction of its cores drawn uniformly per seed "
        "and node; requests do not show it ('0,0': idle cluster). Simulation only.",
    ),
    regressor: str = typer.Option(
        "random_forest",
        help="P90 regressor the simulated scorers train per seed: "
        + ", ".join(REGRESSORS.names())
        + " (--live: the repository's).",
    ),
    live: bool = typer.Option(
        False,
        "--live",
        help="Run the pods for real on this machine's emulated nodes (LoadGen), not simulated.",
    ),
    repo: Path = typer.Option(
        None, help="--live: model repository (latest version) for the P90 scorers."
    ),
    live_nodes: str = typer.Option(
        "",
        help="--live: nodes as core sets, ';' separated (default: Table I / 4, "
        "'0;1,2;3,4,5;6,7,8,9').",
    ),
    live_models: str = typer.Option(
        "resnet50,retinanet", help="--live: zoo models the pods are drawn from, comma separated."
    ),
    out: Path = typer.Option(Path("runs/tail/benchmark"), help="Folder for JSON + plot."),
) -> None:
    """The paper's experiment on seeds drawn at start: default scoring, least-loaded and two
    Trimaran-style load-aware rules against the predicted-P90 scorers (the paper's, ours, and
    default+extender), on the simulated Table I cluster or (--live) with real pods here."""
    master = fresh_master_seed() if seed is None else seed
    seeds = draw_seeds(master, runs)
    console.print(f"master seed {master} ({runs} runs; `--seed {master}` reproduces them)")
    lo, hi = parse_background(background)
    if regressor not in REGRESSORS.names():
        raise HetschedError(f"--regressor must be one of {REGRESSORS.names()}, got {regressor!r}")
    settings: dict[str, Any] = {
        "pods_n": pods,
        "queries": queries,
        "slo_ms": slo_ms or None,
        "objective": objective,
    }
    if live and (lo, hi) != (0.0, 0.0):
        raise HetschedError("--background is for the simulation; --live runs under real load")
    if live:
        report, title = _live(repo, live_nodes, live_models, seeds, settings)
    else:
        rows = load_measured(measured or PACKAGED_MEASURED)
        report = run_benchmark(
            rows, seeds, background=(lo, hi), regressor_name=regressor, **settings
        )
        title = f"background load per node ~ U[{lo:g}, {hi:g}] of its cores"
    report["master_seed"] = master
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmark.json").write_text(json.dumps(report, indent=2))
    plot_avg_np90(report, out / "avg_np90.png", title)
    _print(report, slo_ms or None, out)
