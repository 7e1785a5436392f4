"""``hetsched slim serve`` and ``hetsched slim loadgen``."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from hetsched.core.errors import ConfigError
from hetsched.slim.serving.config import exposure_problem, load_serve_config
from hetsched.slim.serving.loadgen import LoadgenConfig, run_load


def register(app: typer.Typer) -> None:
    """Adds the serving commands to the ``hetsched slim`` app."""
    app.command("serve")(serve_command)
    app.command("loadgen")(loadgen_command)


def serve_command(
    config: Path = typer.Option(..., "--config", help="Serving config YAML (cluster.yaml)."),
    address: str | None = typer.Option(
        None, help="A running Ray cluster (ray start --head prints it); default: local Ray."
    ),
    host: str | None = typer.Option(None, help="Address to bind (default: config, 127.0.0.1)."),
    port: int | None = typer.Option(None, help="HTTP port (default: config, 8000)."),
    token: str | None = typer.Option(
        None, help="Bearer token for every path but the health probes (default: config; none)."
    ),
    router: str | None = typer.Option(None, help="Router name or PPO checkpoint (overrides)."),
    pool: str | None = typer.Option(
        None,
        help="Where servers run: ray (an actor each) or local (threads of this process, one"
        " host, no Ray); default: config, ray.",
    ),
    num_cpus: int | None = typer.Option(None, help="CPUs of a local Ray session (default: all)."),
    insecure: bool = typer.Option(
        False, help="Serve on a non-loopback --host without a --token (refused otherwise)."
    ),
) -> None:
    """Serves SlimResNet over HTTP: one Ray actor (or, --pool local, one thread) per server,
    routed by the Slim router."""
    # The app and the runtime import FastAPI, uvicorn and Ray (the serve extra): only here.
    from hetsched.slim.serving.app import create_app
    from hetsched.slim.serving.http_server import serve_forever
    from hetsched.slim.serving.runtime import ServingRuntime

    if pool not in (None, "ray", "local"):
        raise ConfigError(f"--pool: expected ray or local, got {pool!r}")
    serve_config = load_serve_config(config)
    updates = {"host": host, "port": port, "token": token, "router": router, "pool": pool}
    serve_config = serve_config.model_copy(
        update={k: v for k, v in updates.items() if v is not None}
    )
    if serve_config.pool == "local" and (address is not None or num_cpus is not None):
        raise ConfigError(
            "--address and --num-cpus set up Ray; the local pool runs its servers in this"
            " process without Ray (drop them, or use --pool ray)"
        )
    console = Console(stderr=True, soft_wrap=True)
    problem = exposure_problem(serve_config)
    if problem is not None and not insecure:
        raise ConfigError(f"{problem}; give --token, or --insecure if that is intended")
    if problem is not None:
        console.print(f"warning: {problem} (--insecure)", highlight=False)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    runtime = ServingRuntime(serve_config, address=address, num_cpus=num_cpus)
    console.print(
        f"serving {serve_config.checkpoint} on http://{serve_config.host}:{serve_config.port}"
        f" (router {serve_config.router}, {_where(serve_config.pool, address)})",
        highlight=False,
    )
    serve_forever(
        create_app(runtime),
        serve_config.host,
        serve_config.port,
        serve_config.http,
        startup=runtime.start,
    )


def loadgen_command(
    url: str = typer.Option("http://127.0.0.1:8000", help="Base URL of `hetsched slim serve`."),
    rate: float | None = typer.Option(None, help="Open loop: mean requests per second."),
    pattern: str = typer.Option("poisson", help="Open-loop arrivals: poisson or bursty."),
    concurrency: int | None = typer.Option(None, help="Closed loop: clients back to back."),
    duration_s: float = typer.Option(10.0, "--duration-s", help="Length of the run."),
    images_per_request: int = typer.Option(1, help="Images in each request."),
    deadline_s: float | None = typer.Option(
        None, "--deadline-s", help="Per-request deadline (sent as the X-Deadline-S header)."
    ),
    data: str = typer.Option("digits", help="Test split sent as PNG: digits or digits:SIZE."),
    token: str | None = typer.Option(None, help="Bearer token of the server."),
    seed: int = typer.Option(0, help="Seed of arrival times and image picks."),
    out: Path | None = typer.Option(None, help="Also write the report as JSON here."),
) -> None:
    """Sends real HTTP load; reports goodput, latency p50/p90/p99, refusals, energy/image."""
    if pattern not in ("poisson", "bursty"):
        raise ConfigError(f"--pattern: expected poisson or bursty, got {pattern!r}")
    if duration_s <= 0 or images_per_request < 1:
        raise ConfigError("--duration-s must be > 0 and --images-per-request >= 1")
    report = asyncio.run(
        run_load(
            LoadgenConfig(
                url=url.rstrip("/"),
                duration_s=duration_s,
                rate_per_s=rate,
                pattern=pattern,  # type: ignore[arg-type]
                concurrency=concurrency,
                images_per_request=images_per_request,
                data=data,
                deadline_s=deadline_s,
                token=token,
                seed=seed,
            )
        )
    )
    table = Table(title=f"loadgen: {report.mode}, {report.duration_s:.1f} s against {url}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    latency = report.latency_s
    refusals = report.refusal_latency_s
    admitted = report.admitted_latency_s
    energy = report.energy_j_per_image
    rows = [
        ("requests sent / ok", f"{report.requests_sent} / {report.requests_ok}"),
        ("images answered", str(report.images_ok)),
        ("throughput (images/s)", f"{report.throughput_images_per_s:.1f}"),
        ("latency p50 / p90 / p99 (ms)", _millis(latency["p50"], latency["p90"], latency["p99"])),
        (
            "refusals 429/503 p50 / p99 (ms)",
            "none" if refusals is None else _millis(refusals["p50"], refusals["p99"]),
        ),
        (
            "admitted, 200 or 504, p50 / p99 (ms)",
            "none" if admitted is None else _millis(admitted["p50"], admitted["p99"]),
        ),
        ("errors", ", ".join(f"{k}: {v}" for k, v in sorted(report.errors.items())) or "none"),
        ("accuracy vs labels", "n/a" if report.accuracy is None else f"{report.accuracy:.1%}"),
        (
            "energy per image (J)",
            "n/a" if energy is None else f"{energy:.3f} ({report.energy_source})",
        ),
    ]
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    for status, body in sorted(report.error_examples.items()):
        console.print(f"example {status}: {body}", highlight=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report.as_dict(), indent=1))
        console.print(f"report: {out}")


def _where(pool: str, address: str | None) -> str:
    """Where the servers run, for the start-up line."""
    if pool == "local":
        return "servers in this process"
    return f"Ray {'at ' + address if address else 'local'}"


def _millis(*seconds: float) -> str:
    return " / ".join(f"{1e3 * s:.1f}" for s in seconds)
