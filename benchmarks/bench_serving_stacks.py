"""FastAPI + Ray actors (``hetsched slim serve``), FastAPI + servers in the front's process
(``pool: local``), Slim on Ray Serve, Ray Serve's ``@serve.batch`` baseline and a single-process
batched FastAPI server (``serving_single_process.py``, as many torch threads as the others have
CPUs): the same model, the same load, one after another. ``--router`` sets the two FastAPI
stacks' router (``jsq-1.0`` runs every image at full width, the baseline's work).

Run: ``.venv/bin/python benchmarks/bench_serving_stacks.py --checkpoint CKPT``; one Slim server
with both cores batching over both: ``--servers 1 --server-cpus 2 --torch-threads 2``.

Each stack runs in its own process with its own local Ray session of two CPUs (two servers, or
two replicas for the baseline); the load generator (raw-socket client) runs in this process.
Per stack: a 3 s warm-up, then

1. closed loop, ``--concurrency`` clients: images/s, p50/p99;
2. open loop at each rate of ``--rates`` with deadline ``--deadline-s`` (``X-Deadline-S``):
   goodput, admitted p99, refusals and their p99;
3. (the two Slim stacks) a fault: open loop at ``--fault-load`` x the closed-loop images/s and,
   a third into the run, ``kill -9`` of one server's process: requests lost (anything but
   200, 429 and 504), time until ``/metrics`` shows a server down, and until all are up again.
   ``--servers 3 --stacks fastapi-actors`` is the three-server fault run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import yaml

from hetsched.slim.model.checkpoint import load_checkpoint
from hetsched.slim.serving.loadgen import LoadgenConfig, LoadReport, run_load, wait_ready

STACKS = ("fastapi-actors", "fastapi-local", "slim-on-serve", "serve-batch", "single-process")
SERVER_PROCESS = {"fastapi-actors": "ray::ServerActor", "slim-on-serve": "server-cpu0"}
"""How a server's process names itself (Ray's process title) in each Slim stack (the actors'
titles do not name the server: the first found is killed, and ``/metrics`` says which)."""
UP = re.compile(r'^hetsched_slim_server_up\{server="([^"]+)"\} (\S+)$', re.MULTILINE)


@contextmanager
def launch(
    stack: str,
    checkpoint: Path,
    folder: Path,
    port: int,
    servers: int,
    router: str,
    server_cpus: int = 1,
    torch_threads: int = 1,
) -> Iterator[psutil.Process]:
    """Starts ``stack`` serving on ``port``; yields its process once it answers ``/readyz``.

    Each Slim server gets ``server_cpus`` CPUs and ``torch_threads`` threads per batch; the
    single-process baseline as many torch threads as the Slim stack has CPUs.
    """
    env = os.environ | {"RAY_AUTH_MODE": "disabled"}
    cpus = servers * server_cpus
    if stack in ("fastapi-actors", "fastapi-local"):
        config = folder / "cluster-stacks.yaml"
        names = [
            {"name": f"cpu{i}", "num_cpus": server_cpus, "torch_threads": torch_threads}
            for i in range(servers)
        ]
        pool = "local" if stack == "fastapi-local" else "ray"
        config.write_text(
            yaml.safe_dump(
                {
                    "checkpoint": str(checkpoint.resolve()),
                    "servers": names,
                    "port": port,
                    "pool": pool,
                    "router": router,
                }
            )
        )
        command = [sys.executable, "-c", "from hetsched.cli import app; app()", "slim", "serve"]
        command += ["--config", str(config)]
        command += ["--num-cpus", str(cpus)] if pool == "ray" else []
    elif stack == "single-process":
        script = Path(__file__).with_name("serving_single_process.py")
        command = [sys.executable, str(script), "--checkpoint", str(checkpoint)]
        command += ["--port", str(port), "--threads", str(cpus)]
    else:
        script = Path(__file__).with_name("serving_rayserve.py")
        command = [sys.executable, str(script), "--stack", stack, "--checkpoint", str(checkpoint)]
        command += ["--port", str(port), "--servers", str(servers)]
    log = (folder / f"{stack}.log").open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{port}", 300, is_alive=lambda: process.poll() is None)
        yield psutil.Process(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def load(url: str, data: str, duration_s: float, **kwargs: Any) -> LoadReport:
    return asyncio.run(run_load(LoadgenConfig(url=url, data=data, duration_s=duration_s, **kwargs)))


def summary(stack: str, run: str, report: LoadReport) -> dict:
    refusals = report.refusal_latency_s or {}
    return {
        "stack": stack,
        "run": run,
        "sent": report.requests_sent,
        "images_per_s": round(report.throughput_images_per_s, 1),
        "goodput_images_per_s": round(report.goodput_images_per_s, 1),
        "p50_ms": round(1e3 * report.latency_s["p50"], 1),
        "p99_ms": round(1e3 * report.latency_s["p99"], 1),
        "refused": sum(v for k, v in report.errors.items() if k in ("429", "503")),
        "refusal_p99_ms": round(1e3 * refusals.get("p99", float("nan")), 1),
        "errors": {k: v for k, v in report.errors.items() if k not in ("429", "503")},
        "load_average": round(os.getloadavg()[0], 1),
    }


def servers_down(url: str) -> set[str] | None:
    """The servers ``/metrics`` shows down (None when it cannot be read)."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    return {name for name, value in UP.findall(text) if float(value) != 1.0}


def fault(stack: str, process: psutil.Process, url: str, rate: float, args, data: str) -> dict:
    """Open-loop load at ``rate`` with a kill -9 of one server a third into it."""
    marker = SERVER_PROCESS[stack]
    victims = [p for p in process.children(recursive=True) if marker in " ".join(p.cmdline()[:1])]
    if not victims:
        raise RuntimeError(f"no process named {marker!r} under {stack}")
    events: dict[str, float] = {}

    def kill_and_watch() -> None:
        time.sleep(args.duration_s / 3)
        victims[0].send_signal(signal.SIGKILL)
        events["kill"] = time.monotonic()
        while time.monotonic() - events["kill"] < 120:
            down = servers_down(url)
            if down and "down" not in events:
                events["down"] = time.monotonic()
            if down == set() and "down" in events:
                events["up"] = time.monotonic()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=kill_and_watch)
    watcher.start()
    report = load(url, data, args.duration_s, rate_per_s=rate, deadline_s=5.0)
    watcher.join()
    row = summary(stack, f"kill -9 of 1 of {args.servers} servers at {rate:.0f}/s", report)
    lost = sum(v for k, v in report.errors.items() if k not in ("429", "503", "504"))
    row |= {
        "lost": lost,
        "detected_down_s": round(events["down"] - events["kill"], 2) if "down" in events else None,
        "back_up_s": round(events["up"] - events["kill"], 2) if "up" in events else None,
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument("--duration-s", type=float, default=12.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rates", default="40,120", help="open-loop rates; '' for none")
    parser.add_argument("--deadline-s", type=float, default=0.5)
    parser.add_argument("--servers", type=int, default=2, help="servers (replicas) per stack")
    parser.add_argument("--server-cpus", type=int, default=1, help="CPUs of each Slim server")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch threads of each Slim server's batches"
    )
    parser.add_argument(
        "--fault-load", type=float, default=0.7, help="fault run's rate / closed-loop img/s"
    )
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument(
        "--router",
        default="random",
        help="router of the two FastAPI stacks (jsq-1.0: full width, the baseline's work)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/slim-serving/stacks.json"))
    args = parser.parse_args()
    if min(args.servers, args.server_cpus, args.torch_threads) < 1:
        parser.error("--servers, --server-cpus and --torch-threads must be at least 1")
    data = load_checkpoint(args.checkpoint)["config"]["data"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for stack in args.stacks.split(","):
        with launch(
            stack,
            args.checkpoint,
            args.out.parent,
            args.port,
            args.servers,
            args.router,
            args.server_cpus,
            args.torch_threads,
        ) as process:
            url = f"http://127.0.0.1:{args.port}"
            load(url, data, 3.0, rate_per_s=20)  # warm-up: instances loaded, JIT paths hot
            closed = load(url, data, args.duration_s, concurrency=args.concurrency)
            rows.append(summary(stack, f"closed loop x{args.concurrency}", closed))
            print(json.dumps(rows[-1]), flush=True)
            for rate in [float(r) for r in args.rates.split(",") if r]:
                report = load(
                    url, data, args.duration_s, rate_per_s=rate, deadline_s=args.deadline_s
                )
                rows.append(summary(stack, f"open loop {rate:g}/s", report))
                print(json.dumps(rows[-1]), flush=True)
            if stack in SERVER_PROCESS:
                rate = args.fault_load * closed.throughput_images_per_s
                rows.append(fault(stack, process, url, rate, args, data))
                print(json.dumps(rows[-1]), flush=True)
        args.port += 1  # the next stack never meets a socket still closing
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
