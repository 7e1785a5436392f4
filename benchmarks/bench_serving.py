"""Slim serving on this machine: throughput and p99 under load, and the cost of HTTP + Ray.

Run: ``.venv/bin/python benchmarks/bench_serving.py --checkpoint CKPT --ppo ROUTER.pt
[--pool ray|local] [--parts sweep,overhead]``

1. **Load sweep.** ``hetsched slim serve`` twice (each its own local Ray session with two CPU
   servers, or with ``--pool local`` the servers as threads of the serving process), one with the
   random router and one with the PPO router; at each of increasing Poisson rates, ``loadgen``
   sends single-image PNG requests of the digits test split to one and then the other for
   ``--duration-s`` each (open loop, seeded): answered images/s, client-side latency p50/p99,
   requests refused (429/503), energy per image from ``/metrics``.
2. **Overhead.** The same four segments at full width, one image at a time (closed loop,
   concurrency 1) and at concurrency 16: (a) in-process, a greedy executor on the live backend
   called directly (``SegmentWorker.run_block``, no HTTP, no Ray); (b) through HTTP + the front +
   the servers (``--overhead-router``, by default ``jsq-1.0``: full width, least-loaded server,
   the largest block; ``static-widest`` draws a random block size). The difference of the
   per-image latencies is what the serving path adds. ``--one-server [--torch-threads T]``: one
   server of two CPUs with T threads per batch, and the in-process executor with T threads, so
   both paths form the same batches (by default two servers of one CPU split the images).
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
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import torch
import yaml

from hetsched.core.metrics import summarize
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.model.data import load_dataset
from hetsched.slim.routers import ROUTERS
from hetsched.slim.serving.loadgen import LoadgenConfig, run_load, wait_ready
from hetsched.slim.serving.worker import SegmentWorker

PORT = 8765


@contextmanager
def serve(
    checkpoint: Path,
    router: str,
    folder: Path,
    pool: str,
    port: int = PORT,
    servers: tuple[dict, ...] = ({"name": "cpu0"}, {"name": "cpu1"}),
) -> Iterator[str]:
    """``hetsched slim serve`` in its own process (CPU servers, two by default, in a local Ray
    session or as threads of that process): the load generator must not share a process, and its
    GIL, with the server it measures."""
    config = folder / f"cluster-{Path(router).stem}.yaml"
    cpus = max(2, sum(int(server.get("num_cpus", 1)) for server in servers))
    config.write_text(
        yaml.safe_dump(
            {
                "checkpoint": str(checkpoint.resolve()),
                "servers": list(servers),
                "router": str(Path(router).resolve()) if router.endswith(".pt") else router,
                "port": port,
                "pool": pool,
            }
        )
    )
    command = [sys.executable, "-c", "from hetsched.cli import app; app()", "slim", "serve"]
    log = config.with_suffix(".log").open("w")
    process = subprocess.Popen(
        [*command, "--config", str(config), *(["--num-cpus", str(cpus)] if pool == "ray" else [])],
        env=os.environ | {"RAY_AUTH_MODE": "disabled"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, is_alive=lambda: process.poll() is None)
        asyncio.run(run_load(LoadgenConfig(url=url, duration_s=3.0, rate_per_s=20)))  # warm-up
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)
        log.close()


def sweep(checkpoint: Path, routers: list[str], args: argparse.Namespace, data: str) -> list:
    """Every rate on every router, rate by rate: each router's server runs all along, so the
    routers meet the same background load on this shared machine (only the one under load works)."""
    rows = []
    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve(checkpoint, router, args.out.parent, args.pool, PORT + i))
            for i, router in enumerate(routers)
        ]
        for rate in [float(r) for r in args.rates.split(",")]:
            for router, url in zip(routers, urls, strict=True):
                config = LoadgenConfig(
                    url=url, duration_s=args.duration_s, rate_per_s=rate, data=data
                )
                report = asyncio.run(run_load(config))
                refused = sum(v for k, v in report.errors.items() if k in ("429", "503"))
                rows.append(
                    {
                        "router": Path(router).stem,
                        "rate_per_s": rate,
                        "throughput_images_per_s": report.throughput_images_per_s,
                        "p50_ms": 1e3 * report.latency_s["p50"],
                        "p99_ms": 1e3 * report.latency_s["p99"],
                        "sent": report.requests_sent,
                        "refused": refused,
                        "other_errors": sum(report.errors.values()) - refused,
                        "accuracy": report.accuracy,
                        "energy_j_per_image": report.energy_j_per_image,
                        "energy_source": report.energy_source,
                        "load_average": os.getloadavg()[0],
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


async def in_process(checkpoint: Path, images: np.ndarray, concurrency: int) -> dict:
    """Per-image latency and images/s calling one live executor directly, four segments at 1.0."""
    payload = load_checkpoint(checkpoint)
    worker = SegmentWorker(
        model_from_checkpoint(payload).eval(), "cpu", ExecutorConfig(max_batch=16), "inproc"
    )
    latencies = []

    async def one(x: np.ndarray) -> None:
        started = time.perf_counter()
        prev = 1.0
        for segment in range(4):
            (out,) = await worker.run_block(1.0, [(segment, prev, x)])
            x, prev = out.output, out.executed_width
        latencies.append(time.perf_counter() - started)

    async def client(chunk: np.ndarray) -> None:
        for x in chunk:
            await one(x)

    await one(images[0])  # load the instances first
    latencies.clear()
    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in np.array_split(images, concurrency)))
    elapsed = time.perf_counter() - started
    worker.close()
    return _summary("in-process executor", concurrency, latencies, len(images) / elapsed)


def over_http(checkpoint: Path, args: argparse.Namespace, data: str) -> list[dict]:
    rows = []
    servers = (
        ({"name": "cpu0", "num_cpus": 2, "torch_threads": args.torch_threads},)
        if args.one_server
        else ({"name": "cpu0"}, {"name": "cpu1"})
    )
    with serve(
        checkpoint, args.overhead_router, args.out.parent, args.pool, servers=servers
    ) as url:
        for concurrency in (1, 16):
            config = LoadgenConfig(
                url=url, duration_s=args.duration_s, concurrency=concurrency, data=data
            )
            report = asyncio.run(run_load(config))
            latency = report.latency_s
            rows.append(
                {
                    "path": f"HTTP + front + servers (pool {args.pool})",
                    "concurrency": concurrency,
                    "images_per_s": report.throughput_images_per_s,
                    **{f"{k}_ms": 1e3 * latency[k] for k in ("p50", "p99", "mean")},
                }
            )
    return rows


def _summary(path: str, concurrency: int, latencies: list[float], rate: float) -> dict:
    s = summarize(latencies)
    return {
        "path": path,
        "concurrency": concurrency,
        "images_per_s": rate,
        "p50_ms": 1e3 * s.p50,
        "p99_ms": 1e3 * s.p99,
        "mean_ms": 1e3 * s.mean,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="SlimResNet checkpoint")
    parser.add_argument("--ppo", type=Path, help="PPO router for 2 servers (the sweep's)")
    parser.add_argument("--rates", default="25,50,100,200", help="requests/s, comma-separated")
    parser.add_argument("--duration-s", type=float, default=8.0)
    parser.add_argument("--overhead-images", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("runs/slim-serving/bench.json"))
    parser.add_argument(
        "--overhead-router",
        default="jsq-1.0",
        help="overhead: the HTTP path's router (full width; jsq-1.0 sends the largest blocks)",
    )
    parser.add_argument("--pool", default="ray", choices=("ray", "local"), help="where servers run")
    parser.add_argument("--parts", default="sweep,overhead", help="which parts to run, commas")
    parser.add_argument(
        "--one-server",
        action="store_true",
        help="overhead: one HTTP server of two CPUs batching like the in-process executor (the"
        " same batches), not two servers of one",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="threads per batch of the in-process executor and of the --one-server server"
        " (default: torch's; two cores // threads batches at once)",
    )
    args = parser.parse_args()
    if args.torch_threads is not None and args.torch_threads < 1:
        parser.error("--torch-threads must be at least 1")
    if args.overhead_router not in ROUTERS.names():
        parser.error(
            f"--overhead-router: unknown router {args.overhead_router!r};"
            f" one of {', '.join(ROUTERS.names())}"
        )
    if args.torch_threads is None:
        args.torch_threads = torch.get_num_threads()
    torch.set_num_threads(args.torch_threads)
    parts = set(args.parts.split(","))
    if not parts or not parts <= {"sweep", "overhead"}:
        parser.error(f"--parts: expected sweep and/or overhead, got {args.parts!r}")
    if "sweep" in parts and args.ppo is None:
        parser.error("the sweep needs --ppo")
    torch.set_num_threads(1)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    data = load_checkpoint(args.checkpoint)["config"]["data"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load = sweep(args.checkpoint, ["random", str(args.ppo)], args, data) if "sweep" in parts else []
    overhead = over_http(args.checkpoint, args, data) if "overhead" in parts else []
    images = load_dataset(data).test_images[: args.overhead_images].numpy()
    for concurrency in (1, 16) if "overhead" in parts else ():
        overhead.append(asyncio.run(in_process(args.checkpoint, images, concurrency)))
    for row in overhead:
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"load": load, "overhead": overhead}, indent=1))
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
