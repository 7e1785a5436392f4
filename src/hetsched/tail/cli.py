"""`hetsched tail` sub-commands: features, measurement, dataset, training, serving, benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hetsched.core.errors import HetschedError

app = typer.Typer(no_args_is_help=True)
console = Console()


def _table(title: str, rows: list[dict], columns: list[str]) -> None:
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in columns])
    console.print(table)


@app.command()
def flops(
    models: list[str] = typer.Argument(
        ..., help="Zoo names, or ONNX files as path.onnx or key=path.onnx (trusted input)."
    ),
) -> None:
    """Model features by eqs. 1-5: FLOPs per inference (FlopCounterMode) and size (MiB)."""
    from hetsched.tail.catalog_build import build_catalog

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
    from hetsched.tail.catalog import save_catalog
    from hetsched.tail.catalog_build import build_catalog
    from hetsched.tail.zoo import MODELS

    built = build_catalog(models or MODELS.names())
    save_catalog(built, out)
    console.print(f"wrote {len(built.models)} models ({', '.join(built.model_keys())}) to {out}")


def _parse_nodes(text: str) -> list:
    from hetsched.tail.harness import EmulatedNode

    nodes = []
    for spec in text.split(";"):
        try:
            cores = tuple(int(c) for c in spec.split(","))
        except ValueError:
            raise HetschedError(f"bad node spec {spec!r}: use core ids like '0;0,1'") from None
        nodes.append(EmulatedNode("cores" + "-".join(map(str, cores)), cores, 2.3))
    return nodes


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
    from hetsched.tail.harness import measure_grid
    from hetsched.tail.latency_exporter import LatencyExporter

    try:
        plan = {m.split(":")[0]: int(m.split(":")[1]) for m in models.split(",")}
        duty_list = [float(d) for d in duties.split(",")]
    except (IndexError, ValueError):
        raise HetschedError("--models needs name:queries pairs and --duties numbers") from None
    exporter = LatencyExporter(prometheus_port) if prometheus_port else None
    try:
        rows = measure_grid(
            plan, _parse_nodes(nodes), duty_list, repeats, exporter, torch_threads, seed, out
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
    from hetsched.tail.dataset import (
        from_prometheus,
        load_csv,
        smooth_target,
        with_arrival_features,
        write_dataset_csv,
    )

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
    from hetsched.tail.dataset import CELL_KEYS, load_csv, repeat_spread
    from hetsched.tail.regressors import (
        ModelRepository,
        compare_regressors,
        summarize_splits,
        train_and_save,
    )

    rows = load_csv(data)
    report = train_and_save(rows, ModelRepository(repo), seed)
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
        f"best {report['best']} tuned {report['best_params']}: "
        f"RMSE {report['tuned']['rmse_ms']:.3f} ms, RMSLE {report['tuned']['rmsle']:.4f}"
        f" → saved {repo}/{report['version']}"
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
    import time

    from hetsched.tail.dataset import from_prometheus, write_dataset_csv
    from hetsched.tail.regressors import ModelRepository

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
def extender(
    repo: Path = typer.Option(Path("runs/tail/models"), help="Versioned model repository."),
    catalog: Path = typer.Option(
        None, help="Model-feature catalogue (`tail catalog`); default: the built-in zoo's."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to bind (0.0.0.0: all interfaces)."),
    port: int = typer.Option(8888, help="Port (0: a free one)."),
    token_file: Path = typer.Option(
        None, help="File holding a bearer token every call but the probes must send."
    ),
    tls_cert: Path = typer.Option(None, help="PEM certificate: serve HTTPS."),
    tls_key: Path = typer.Option(None, help="PEM key of --tls-cert."),
    tls_client_ca: Path = typer.Option(
        None, help="PEM CA: require client certificates it signed (kube-scheduler's tlsConfig)."
    ),
    max_body_mib: float = typer.Option(8.0, min=0.01, help="Largest request body (MiB)."),
    node_prometheus: str = typer.Option(
        "", help="Prometheus with node_exporter metrics: live load, refreshed in the background."
    ),
    node_label: str = typer.Option("node", help="Series label holding the node name."),
    instance_node: list[str] = typer.Option(
        None, help="INSTANCE=NODE for series without --node-label (repeatable)."
    ),
    telemetry_interval_s: float = typer.Option(15.0, min=0.1, help="Telemetry refresh period."),
    telemetry_ttl_s: float = typer.Option(
        60.0, min=0.1, help="A node reading older than this is stale: scored neutrally."
    ),
    error_band: float = typer.Option(
        0.0, min=0.0, help="Score dead band in log1p(ms) (0: the model's recorded RMSLE)."
    ),
    duration_s: float = typer.Option(0.0, help="Stop after this long (0: run until Ctrl-C)."),
    print_config: bool = typer.Option(False, help="Print a KubeSchedulerConfiguration and exit."),
) -> None:
    """Serves the scheduler extender (POST /filter, /prioritize; /healthz, /readyz, /metrics)."""
    import time

    from hetsched.core.web import ServiceConfig
    from hetsched.core.web_server import ServiceServer
    from hetsched.tail.extender import scheduler_config
    from hetsched.tail.extender_app import build_extender, create_extender_app
    from hetsched.tail.telemetry import PrometheusNodeSource, parse_instance_nodes

    if token_file is not None and not token_file.is_file():
        raise HetschedError(f"--token-file {token_file} not found")
    config = ServiceConfig(
        host=host,
        port=port,
        token=token_file.read_text().strip() if token_file else None,
        max_body_bytes=int(max_body_mib * 2**20),
        tls_certfile=tls_cert,
        tls_keyfile=tls_key,
        tls_client_ca=tls_client_ca,
    )
    if print_config:
        url = f"{config.scheme}://{host}:{port}"
        console.print(scheduler_config(url, bool(node_prometheus)), highlight=False)
        return
    source = None
    if node_prometheus:
        instances = parse_instance_nodes(instance_node or [])
        source = PrometheusNodeSource(node_prometheus, node_label, instances)
    service = build_extender(repo, catalog, error_band or None, telemetry_ttl_s if source else None)
    app = create_extender_app(service, config, source, telemetry_interval_s)
    warning = config.exposure_warning()
    if warning:
        console.print(warning, style="yellow")
    server = ServiceServer(app, config)
    if not duration_s:
        console.print(f"extender on {config.scheme}://{host}:{port} (Ctrl-C stops)")
        server.serve()
        return
    console.print(f"extender on {server.start()} for {duration_s:g} s")
    try:
        time.sleep(duration_s)
    finally:
        server.stop()


@app.command()
def schedule(
    kubeconfig: Path = typer.Option(
        None, help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)."
    ),
    context: str = typer.Option(None, help="kubeconfig context (default: its current one)."),
    in_cluster: bool = typer.Option(
        False, "--in-cluster", help="Authenticate as the pod's service account."
    ),
    repo: Path = typer.Option(Path("runs/tail/models"), help="Versioned model repository."),
    catalog: Path = typer.Option(
        None, help="Model-feature catalogue (`tail catalog`); default: the built-in zoo's."
    ),
    scheduler_name: str = typer.Option("hetsched-tail", help="spec.schedulerName we serve."),
    rounds: int = typer.Option(0, min=0, help="Scheduling rounds (0: until Ctrl-C / SIGTERM)."),
    watch: bool = typer.Option(True, help="Watch for new pods between rounds (else poll)."),
    poll_interval_s: float = typer.Option(5.0, min=0.1, help="Longest wait between rounds."),
    bind_attempts: int = typer.Option(5, min=1, help="Bind tries per decision."),
    seed: int = typer.Option(0, help="Seed of the retry backoff's jitter."),
    error_band: float = typer.Option(
        0.0, min=0.0, help="Score dead band in log1p(ms) (0: the model's recorded RMSLE)."
    ),
    node_prometheus: str = typer.Option(
        "", help="Prometheus with node_exporter metrics: live load, refreshed in the background."
    ),
    node_label: str = typer.Option("node", help="Series label holding the node name."),
    telemetry_interval_s: float = typer.Option(15.0, min=0.1, help="Telemetry refresh period."),
    telemetry_ttl_s: float = typer.Option(
        60.0, min=0.1, help="A node reading older than this is not used (idle capacity instead)."
    ),
) -> None:
    """Stand-alone scheduler: binds pods with our schedulerName to the feasible node (fit, cordon,
    taints, nodeSelector, affinity) with the lowest predicted P90; an Event per decision."""
    from hetsched.tail.extender_app import build_extender
    from hetsched.tail.kube_cluster import KubeCluster, load_api_client
    from hetsched.tail.scheduler_loop import LoopSettings, TailScheduler
    from hetsched.tail.telemetry import PrometheusNodeSource, TelemetryRefresher

    cluster = KubeCluster(load_api_client(kubeconfig, context, in_cluster))
    ttl_s = telemetry_ttl_s if node_prometheus else None
    service = build_extender(repo, catalog, error_band or None, ttl_s)
    settings = LoopSettings(
        scheduler_name=scheduler_name,
        bind_attempts=bind_attempts,
        poll_interval_s=poll_interval_s,
        seed=seed,
    )
    scheduler = TailScheduler(cluster, service.scorer, service.catalog, settings, service.telemetry)
    refresher = None
    if node_prometheus and service.telemetry is not None:
        source = PrometheusNodeSource(node_prometheus, node_label)
        refresher = TelemetryRefresher(source, service.telemetry, telemetry_interval_s)
        refresher.start()
    counts = {"Scheduled": 0, "FailedScheduling": 0}
    try:
        for decision in scheduler.run(rounds, watch):
            counts[decision.outcome] = counts.get(decision.outcome, 0) + 1
            where = f" → {decision.node}" if decision.node else ""
            pod = f"{decision.namespace}/{decision.pod}"
            console.print(f"{decision.outcome} {pod}{where}: {decision.message}", highlight=False)
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        if refresher is not None:
            refresher.stop()
    console.print(
        f"{counts['Scheduled']} pods bound, {counts['FailedScheduling']} scheduling failures",
        highlight=False,
    )


def _simulated_benchmark(
    measured: Path,
    seeds: list[int],
    pods: int,
    queries: int,
    slo_ms: float | None,
    objective: str,
    background: str,
) -> tuple[dict, str]:
    """The Table I simulation calibrated on harness rows; the report and its plot title."""
    import csv as csv_module

    from hetsched.tail.benchmark import run_benchmark
    from hetsched.tail.sim_cluster import parse_background

    lo, hi = parse_background(background)
    if not measured.is_file():
        raise HetschedError(f"no measured data at {measured}; run `hetsched tail measure` first")
    with open(measured, newline="") as handle:
        rows = [
            {k: (v if k in ("model", "node") else float(v)) for k, v in r.items()}
            for r in csv_module.DictReader(handle)
        ]
    report = run_benchmark(
        rows, seeds, pods, queries, slo_ms, objective=objective, background=(lo, hi)
    )
    return report, f"background load per node ~ U[{lo:g}, {hi:g}] of its cores"


def _live_benchmark(
    repo: Path | None,
    live_nodes: str,
    live_models: str,
    seeds: list[int],
    pods: int,
    queries: int,
    slo_ms: float | None,
    objective: str,
) -> tuple[dict, str]:
    """The pods run on this machine's emulated nodes; the report and its plot title."""
    import os

    from hetsched.core.errors import DataError
    from hetsched.tail.live_benchmark import run_live_benchmark
    from hetsched.tail.live_nodes import resolve_nodes
    from hetsched.tail.regressors import ModelRepository

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
        given = _parse_nodes(live_nodes) if live_nodes else None
    except HetschedError as error:
        raise HetschedError(f"--live-nodes: {error}") from None
    nodes = resolve_nodes(given, os.sched_getaffinity(0))
    models = [m.strip() for m in live_models.split(",") if m.strip()]
    report = run_live_benchmark(regressor, nodes, models, seeds, pods, queries, slo_ms, objective)
    report["model_version"] = meta["version"]
    load = report["load_avg_after"][0]
    return report, f"live on this machine, {queries} queries per pod, load avg {load:.1f}"


def _print_benchmark(report: dict, slo_ms: float | None, out: Path) -> None:
    """The table of AVG_NP90 and pods per node for each seed and scorer, then the means."""
    from hetsched.tail.placement import SCORERS

    table_rows = []
    for r in report["seeds"]:
        for scorer in SCORERS:
            row = {
                "seed": r["seed"],
                "scorer": scorer,
                "mean AVG_NP90 ms": 1e3 * r[scorer]["mean_avg_np90_s"],
                "mean pod P90 ms": 1e3 * r[scorer]["mean_pod_p90_s"],
            }
            for name in report["nodes"]:
                row[name] = r[scorer]["placement"].count(name)
            if slo_ms:
                row["SLO viol."] = r[scorer]["slo_violation_rate"]
            table_rows.append(row)
    _table("AVG_NP90 (eq. 16), pods per node", table_rows, list(table_rows[0]))
    if report.get("background_range", [0.0, 0.0])[1] > 0:
        for r in report["seeds"]:
            loads = ", ".join(f"{n} {b:.2f}" for n, b in r["background"].items())
            console.print(f"seed {r['seed']} background: {loads}")
    if "load_avg_before" in report:
        before, after = report["load_avg_before"][0], report["load_avg_after"][0]
        console.print(f"this machine's 1-min load average: {before:.2f} before, {after:.2f} after")
    s = report["summary"]
    means = ", ".join(f"{k} {1e3 * v['mean_avg_np90']:.1f} ms" for k, v in s.items())
    console.print(f"mean AVG_NP90 over seeds: {means} → {out}")
    if slo_ms:
        rates = ", ".join(f"{k} {v['slo_violation_rate']:.2f}" for k, v in s.items())
        console.print(f"mean SLO-violation rate (P90 > {slo_ms:g} ms): {rates}")
    for scorer, v in s.items():
        if "vs_default" in v:
            d = v["vs_default"]
            console.print(
                f"{scorer} − default, AVG_NP90 per seed: {1e3 * d['mean']:+.1f} ms "
                f"(95 % bootstrap {1e3 * d['low']:+.1f} to {1e3 * d['high']:+.1f}), "
                f"lower on {d['wins']} and higher on {d['losses']} of {d['seeds']} seeds"
            )


@app.command()
def benchmark(
    measured: Path = typer.Option(Path("runs/tail/measured.csv"), help="Harness CSV to calibrate."),
    seeds: str = typer.Option("0,1,2,3,4", help="Comma-separated seeds."),
    pods: int = typer.Option(10, min=1, help="Pods placed one after another."),
    queries: int = typer.Option(1024, min=1, help="Single-stream queries per pod."),
    slo_ms: float = typer.Option(0.0, help="P90 target for the SLO-violation rate (0: off)."),
    objective: str = typer.Option("avg_np90", help="p90-node cost: 'avg_np90' or 'sum'."),
    background: str = typer.Option(
        "0,0",
        help="lo,hi: best-effort load per node, a fraction of its cores drawn uniformly per seed "
        "and node; requests do not show it ('0,0': idle cluster). Simulation only.",
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
    """The paper's experiment: default scoring vs predicted-P90 scorers (the paper's, ours, and
    default+extender: default scoring plus the paper's as our extender at its deployed weight),
    on the simulated Table I cluster or (--live) with real pods on this machine's cores."""
    from hetsched.tail.benchmark_plot import plot_avg_np90
    from hetsched.tail.sim_cluster import parse_background

    seed_list = [int(s) for s in seeds.split(",")]
    if live and parse_background(background) != (0.0, 0.0):
        raise HetschedError("--background is for the simulation; --live runs under real load")
    if live:
        report, title = _live_benchmark(
            repo, live_nodes, live_models, seed_list, pods, queries, slo_ms or None, objective
        )
    else:
        report, title = _simulated_benchmark(
            measured, seed_list, pods, queries, slo_ms or None, objective, background
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmark.json").write_text(json.dumps(report, indent=2))
    plot_avg_np90(report, out / "avg_np90.png", title)
    _print_benchmark(report, slo_ms or None, out)
