"""`hetsched tail` sub-commands: features, measurement, dataset, training and validation here;
serving in :mod:`.cli_serve` and the placement benchmark in :mod:`.cli_benchmark`, registered below.

The library modules are imported at the top (torch with them, ~2 s): the root ``hetsched`` command
loads this module only when a ``tail`` command runs, so ``hetsched --help`` stays fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console

from hetsched.core.errors import HetschedError
from hetsched.tail import cli_benchmark, cli_serve
from hetsched.tail.catalog import save_catalog
from hetsched.tail.catalog_build import build_catalog
from hetsched.tail.dataset import (
    CELL_KEYS,
    from_prometheus,
    load_csv,
    repeat_spread,
    smooth_target,
    with_arrival_features,
    write_dataset_csv,
)
from hetsched.tail.harness import measure_grid, parse_node_specs
from hetsched.tail.latency_exporter import LatencyExporter
from hetsched.tail.regressors import (
    ModelRepository,
    check_enough_rows,
    compare_regressors,
    summarize_splits,
    train_and_save,
)
from hetsched.tail.tables import rich_table
from hetsched.tail.validation import best_on_unseen_cells, grouped_table
from hetsched.tail.zoo import MODELS

app = typer.Typer(no_args_is_help=True)
app.command()(cli_serve.extender)
app.command()(cli_serve.schedule)
app.command()(cli_benchmark.benchmark)
console = Console()


def _table(title: str, rows: list[dict], columns: list[str]) -> None:
    console.print(rich_table(title, rows, columns))


@app.command()
def flops(
    models: list[str] = typer.Argument(
        ..., help="Zoo names, or ONNX files as path.onnx or key=path.onnx (trusted input)."
    ),
) -> None:
    """Model features by eqs. 1-5: FLOPs per inference (FlopCounterMode) and size (MiB)."""
    catalog = build_catalog(models)
    rows = [{"name": key, **catalog.models[key].model_dump()} for key in catalog.model_keys()]
    for r in rows:
        r["gflops"] = r["flops"] / 1e9
    _table(
        "Model features (eqs. 1-5)",
        rows,
        [
            "name",
            "gflops",
            "size_mb",
            "parameters",
            "conv_flops",
            "dense_flops",
            "activation_flops",
            "pooling_flops",
        ],
    )


@app.command()
def catalog(
    models: list[str] = typer.Argument(
        None, help="Zoo names, or ONNX files as path.onnx or key=path.onnx (default: the zoo)."
    ),
    out: Path = typer.Option(..., help="Catalogue JSON to write."),
) -> None:
    """Builds the model-feature catalogue the extender and scheduler load (offline, trusted
    input only: pods may then name these keys and nothing else)."""
    built = build_catalog(models or MODELS.names())
    save_catalog(built, out)
    console.print(f"wrote {len(built.models)} models ({', '.join(built.model_keys())}) to {out}")


@app.command()
def measure(
    models: str = typer.Option("cnn-s:64,cnn-m:48", help="model:queries pairs, comma separated."),
    nodes: str = typer.Option("0;0,1", help="Emulated nodes as core sets, ';' separated."),
    duties: str = typer.Option("0,0.5", help="Background contention duty cycles."),
    repeats: int = typer.Option(1, help="Repetitions of the whole grid."),
    torch_threads: int = typer.Option(0, help="Intra-op threads per node (0: one per core)."),
    seed: int = typer.Option(0, help="Seed of the point order within each repeat."),
    out: Path = typer.Option(Path("runs/tail/measured.csv"), help="CSV to write."),
    prometheus_port: int = typer.Option(0, help="Also export histograms on this port (0: off)."),
) -> None:
    """Runs LoadGen single-stream on emulated nodes under contention; writes P90 rows to CSV."""
    try:
        plan = {m.split(":")[0]: int(m.split(":")[1]) for m in models.split(",")}
        duty_list = [float(d) for d in duties.split(",")]
    except (IndexError, ValueError):
        raise HetschedError("--models needs name:queries pairs and --duties numbers") from None
    exporter = LatencyExporter(prometheus_port) if prometheus_port else None
    try:
        rows = measure_grid(
            plan, parse_node_specs(nodes), duty_list, repeats, exporter, torch_threads, seed, out
        )
    except KeyboardInterrupt:
        console.print(f"interrupted: the points measured so far are in {out}")
        raise typer.Exit(130) from None
    finally:
        if exporter:
            exporter.close()
    for r in rows:
        r["p90_ms"] = r["p90_s"] * 1e3
    _table(
        "Measured P90",
        rows,
        [
            "model",
            "node",
            "contention_duty",
            "contention_achieved",
            "cpu_eff_arrival",
            "cpu_eff",
            "load1",
            "queries",
            "p90_ms",
        ],
    )
    console.print(f"wrote {out}")


@app.command()
def dataset(
    out: Path = typer.Option(..., help="Dataset CSV to write."),
    csv: Path = typer.Option(None, help="Measurement CSV to read."),
    prometheus: str = typer.Option("", help="Prometheus base URL, e.g. http://127.0.0.1:9091."),
    start_s: float = typer.Option(0.0, help="Range start (unix s) for Prometheus."),
    end_s: float = typer.Option(0.0, help="Range end (unix s) for Prometheus."),
    step_s: float = typer.Option(1.0, help="Range step (s)."),
    smooth_window: int = typer.Option(0, help="Eq. 15 log-window size (0: no smoothing)."),
    features_at: str = typer.Option("run", help="Eq. 8 inputs sampled 'run' or 'arrival' (CSV)."),
) -> None:
    """Builds the training dataset (features + P90) from a CSV or Prometheus range queries."""
    if bool(csv) == bool(prometheus):
        raise HetschedError("give exactly one of --csv or --prometheus")
    if features_at not in ("run", "arrival") or (features_at == "arrival" and not csv):
        raise HetschedError("--features-at is 'run' or 'arrival'; 'arrival' needs --csv")
    rows = load_csv(csv) if csv else from_prometheus(prometheus, start_s, end_s, step_s)
    if not rows:
        raise HetschedError("no rows: nothing measured in that range")
    if features_at == "arrival":
        rows = with_arrival_features(rows)
    if smooth_window:
        rows = smooth_target(rows, smooth_window)
    write_dataset_csv(rows, out)
    console.print(f"wrote {len(rows)} rows to {out}")


def _train(data: Path, repo: Path, seed: int, splits: int = 1) -> dict:
    rows = load_csv(data)
    check_enough_rows(rows)
    chosen = None
    if all(k in rows[0] for k in CELL_KEYS):
        best, by_cell = best_on_unseen_cells(rows, seed=seed)
        chosen = (best, "leave-cell-out")
        _table(
            "Leave-cell-out RMSLE (cells the regressor never saw): what chooses the regressor",
            by_cell,
            ["regressor", "folds", "rmsle_mean", "rmsle_low", "rmsle_high"],
        )
    report = train_and_save(rows, ModelRepository(repo), seed, chosen)
    if splits > 1:
        more = [compare_regressors(rows, s) for s in range(seed + 1, seed + splits)]
        report["over_splits"] = summarize_splits([report["table_iii"], *more])
        _table(
            f"Table III RMSLE over {splits} splits (seeds {seed}..{seed + splits - 1})",
            report["over_splits"],
            ["regressor", "rmsle_mean", "rmsle_min", "rmsle_max"],
        )
    if all(k in rows[0] for k in CELL_KEYS):
        report["repeat_spread"] = spread = repeat_spread(rows)
        console.print(
            f"repeat spread: RMSLE floor {spread['rmsle_floor']:.3f} over {spread['cells']} cells "
            f"(median max/min P90 of a cell {spread['median_max_over_min']:.2f})"
        )
    _table(
        "Table III: regressors on held-out data",
        report["table_iii"],
        ["regressor", "rmse_ms", "rmsle", "train_rows", "test_rows"],
    )
    console.print(
        f"best {report['best']} (by {report['chosen_by']}) tuned {report['best_params']}: "
        f"RMSE {report['tuned']['rmse_ms']:.3f} ms, RMSLE {report['tuned']['rmsle']:.4f}"
        f" → saved {repo}/{report['version']}"
    )
    cpu_low, cpu_high = report["node_range"]["cpu_eff"]
    freq_low, freq_high = report["node_range"]["freq_eff_ghz"]
    console.print(
        f"trained on nodes with CPU_eff {cpu_low:.2f}-{cpu_high:.2f} cores and FREQ_eff"
        f" {freq_low:.2f}-{freq_high:.2f} GHz: a node outside gets the prediction at the edge"
        " (no extrapolation), so nodes larger than the grid tie; measure a grid that covers"
        " the cluster's node sizes"
    )
    (repo / f"{report['version']}" / "report.json").write_text(
        json.dumps(report, indent=2, default=str)
    )
    return report


@app.command()
def train(
    data: Path = typer.Option(..., help="Dataset or measurement CSV."),
    repo: Path = typer.Option(Path("runs/tail/models"), help="Versioned model repository."),
    seed: int = typer.Option(0, help="Split and model seed."),
    splits: int = typer.Option(1, help="Also report Table III over this many split seeds."),
) -> None:
    """Compares RF / XGBoost / MLP (Table III), grid-searches the best, saves a new version."""
    _train(data, repo, seed, splits)


@app.command()
def retrain(
    repo: Path = typer.Option(Path("runs/tail/models"), help="Versioned model repository."),
    data: Path = typer.Option(None, help="New monitoring data as CSV."),
    prometheus: str = typer.Option("", help="Or: Prometheus URL to pull the last --range-s from."),
    range_s: float = typer.Option(3600.0, help="How far back to read from Prometheus."),
    seed: int = typer.Option(0, help="Split and model seed."),
) -> None:
    """Refreshes the repository from new monitoring data; reports old vs new metrics."""
    _, old_meta = ModelRepository(repo).load()
    if prometheus:
        now = time.time()
        data = repo / "retrain-data.csv"
        write_dataset_csv(from_prometheus(prometheus, now - range_s, now), data)
    elif data is None:
        raise HetschedError("give --data or --prometheus")
    report = _train(data, repo, seed)
    console.print(
        f"previous {old_meta['version']} RMSLE {old_meta['metrics']['rmsle']:.4f} → "
        f"{report['version']} RMSLE {report['tuned']['rmsle']:.4f}"
    )


@app.command()
def validate(
    data: Path = typer.Option(..., help="Measurement or dataset CSV (harness columns)."),
    folds: int = typer.Option(5, min=2, help="Folds of the random and leave-cell-out schemes."),
    seed: int = typer.Option(0, help="Seed of the fold assignment and the regressors."),
    features_at: str = typer.Option("run", help="Eq. 8 inputs sampled 'run' or 'arrival'."),
    out: Path = typer.Option(Path("runs/tail/validation.json"), help="JSON report to write."),
) -> None:
    """Table III under random, leave-cell-out and leave-one-model-out cross-validation, with 95 %
    intervals across folds and the FLOPs-proportional baseline."""
    if features_at not in ("run", "arrival"):
        raise HetschedError("--features-at is 'run' or 'arrival'")
    rows = load_csv(data)
    if features_at == "arrival":
        rows = with_arrival_features(rows)
    table = grouped_table(rows, folds, seed)
    for r in table:
        r["rmsle (95 % CI)"] = (
            f"{r['rmsle_mean']:.3f} [{r['rmsle_low']:.3f}, {r['rmsle_high']:.3f}]"
        )
    _table(
        f"Table III, grouped cross-validation ({len(rows)} rows, {features_at} features)",
        table,
        ["scheme", "regressor", "folds", "rmsle (95 % CI)", "rmsle_pooled", "rmse_ms_pooled"],
    )
    report: dict = {"rows": len(rows), "features_at": features_at, "seed": seed, "table": table}
    if all(k in rows[0] for k in CELL_KEYS):
        report["repeat_spread"] = spread = repeat_spread(rows)
        console.print(
            f"repeat spread: RMSLE {spread['rmsle_floor']:.3f} around the cell means (what "
            "knowing only the cell gives), median max/min P90 of a cell "
            f"{spread['median_max_over_min']:.2f}"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")
