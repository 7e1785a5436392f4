"""Slim serving under overload: goodput at 1x and 3x capacity, how fast refusals come back.

Run: ``.venv/bin/python benchmarks/bench_serving_overload.py --checkpoint CKPT``

``hetsched slim serve`` runs in its own process (its own local Ray session, two CPU servers; or,
``--pool local``, the two servers as threads of that process); the load generator
(``hetsched.slim.serving.loadgen``, raw-socket client) runs in this one. Steps:

1. **Capacity**: closed loop, ``--capacity-clients`` clients back to back for ``--duration-s``,
   without deadlines (a refused closed-loop client would retry at once): the answered images/s
   is the capacity C.
2. **Open loop** at each multiple of C in ``--multiples`` (Poisson, seeded, single-image PNG
   requests, each with the deadline ``--deadline-s`` in the ``X-Deadline-S`` header): goodput
   (images answered 200 within the deadline, per second), refusals (429/503) and their latency,
   p50/p99 of admitted requests answered 200 (``admitted_*``), p99 of every admitted request
   with those answered 504 at their deadline (``answered_p99_ms``, ``deadline_504``), other
   errors.

The figures that matter: goodput at 3x / goodput at 1x (target >= 0.9), p99 of refusals at 3x
(target <= 20 ms) and p99 of admitted requests against the deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from hetsched.slim.model.checkpoint import load_checkpoint
from hetsched.slim.serving.loadgen import LoadgenConfig, LoadReport, run_load, wait_ready

PORT = 8777


@contextmanager
def serve(config: dict, folder: Path, port: int = PORT) -> Iterator[str]:
    """``hetsched slim serve`` with ``config`` in its own process; yields its URL when ready."""
    path = folder / "cluster-overload.yaml"
    path.write_text(yaml.safe_dump(config | {"port": port}))
    command = [sys.executable, "-c", "from hetsched.cli import app; app()", "slim", "serve"]
    ray_pool = config.get("pool", "ray") == "ray"  # a local Ray session of two CPUs
    log = path.with_suffix(".log").open("w")
    process = subprocess.Popen(
        [*command, "--config", str(path), *(["--num-cpus", "2"] if ray_pool else [])],
        env=os.environ | {"RAY_AUTH_MODE": "disabled"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, is_alive=lambda: process.poll() is None)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)
        log.close()


def row(name: str, offered: float | None, report: LoadReport) -> dict:
    """One table row from a load report."""
    refusals = report.refusal_latency_s or {}
    refused = sum(v for k, v in report.errors.items() if k in ("429", "503"))
    return {
        "run": name,
        "offered_req_per_s": offered,
        "sent": report.requests_sent,
        "throughput_images_per_s": round(report.throughput_images_per_s, 1),
        "goodput_images_per_s": round(report.goodput_images_per_s, 1),
        "admitted_p50_ms": round(1e3 * report.latency_s["p50"], 1),
        "admitted_p99_ms": round(1e3 * report.latency_s["p99"], 1),
        "answered_p99_ms": round(
            1e3 * (report.admitted_latency_s or {}).get("p99", float("nan")), 1
        ),
        "deadline_504": report.errors.get("504", 0),
        "refused": refused,
        "refusal_p50_ms": round(1e3 * refusals.get("p50", float("nan")), 2),
        "refusal_p99_ms": round(1e3 * refusals.get("p99", float("nan")), 2),
        "other_errors": {k: v for k, v in report.errors.items() if k not in ("429", "503")},
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="SlimResNet checkpoint")
    parser.add_argument("--router", default="random", help="router name or PPO checkpoint")
    parser.add_argument("--pool", default="ray", choices=("ray", "local"), help="where servers run")
    parser.add_argument("--deadline-s", type=float, default=0.5)
    parser.add_argument("--duration-s", type=float, default=15.0)
    parser.add_argument("--capacity-clients", type=int, default=32)
    parser.add_argument("--multiples", default="1,3", help="offered load / capacity, commas")
    parser.add_argument("--out", type=Path, default=Path("runs/slim-serving/overload.json"))
    parser.add_argument(
        "--server-nice",
        type=int,
        default=0,
        help="niceness of the servers (0-19; with --pool local, of their threads)",
    )
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    data = load_checkpoint(args.checkpoint)["config"]["data"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "checkpoint": str(args.checkpoint.resolve()),
        "servers": [{"name": f"cpu{i}", "nice": args.server_nice} for i in range(2)],
        "router": args.router,
        "pool": args.pool,
    }
    rows = []
    with serve(config, args.out.parent) as url:

        def load(**kwargs) -> LoadReport:
            settings = LoadgenConfig(
                **{"url": url, "duration_s": args.duration_s, "data": data} | kwargs
            )
            return asyncio.run(run_load(settings))

        load(rate_per_s=20, duration_s=3.0)  # warm-up: every instance loaded
        capacity = load(concurrency=args.capacity_clients)  # no deadline: nothing refused
        rows.append(row(f"capacity (closed loop, {args.capacity_clients} clients)", None, capacity))
        print(json.dumps(rows[-1]), flush=True)
        for multiple in [float(m) for m in args.multiples.split(",")]:
            time.sleep(2.0)  # let the previous run drain
            rate = multiple * capacity.throughput_images_per_s
            report = load(rate_per_s=rate, deadline_s=args.deadline_s, seed=int(multiple * 10))
            rows.append(row(f"{multiple:g}x capacity", round(rate, 1), report))
            print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
