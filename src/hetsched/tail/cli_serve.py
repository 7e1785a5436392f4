"""`hetsched tail extender` and `hetsched tail schedule`: the two ways the P90 model places pods
(registered on the tail app by :mod:`hetsched.tail.cli`)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console

from hetsched.core.errors import HetschedError
from hetsched.core.web import ServiceConfig
from hetsched.core.web_server import ServiceServer
from hetsched.tail.extender import scheduler_config
from hetsched.tail.extender_app import build_extender, create_extender_app
from hetsched.tail.kube_cluster import KubeCluster, load_api_client
from hetsched.tail.scheduler_loop import LoopSettings, TailScheduler
from hetsched.tail.telemetry import (
    PrometheusNodeSource,
    TelemetryRefresher,
    parse_instance_nodes,
)

console = Console()


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
