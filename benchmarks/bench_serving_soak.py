"""Slim serving soak: memory of the front and of every server actor under steady load.

Run: ``.venv/bin/python -m benchmarks.bench_serving_soak --checkpoint CKPT [--minutes 30]
[--load-factor 0.8] [--interval-s 5] [--pool ray|local] [--router R]
[--out runs/slim-serving/soak]``

``hetsched slim serve`` (FastAPI front + two Ray server actors, a local Ray session; or, with
``--pool local``, the two servers as threads of the front's process) runs in its own process;
the load generator runs in this one. First the capacity C (closed loop, 32 clients,
``--capacity-s``), then open-loop Poisson load at ``--load-factor`` x C with a 5 s deadline, in
one-minute chunks (seeds 1, 2, ...) for ``--minutes``. Every ``--interval-s`` the resident set
(RSS) and the unique set (USS: pages no other process shares, i.e. what the process itself costs
beyond the shared torch/Ray libraries) of the front and of each ``ray::ServerActor`` process are
written to ``samples.csv``; ``soak.png`` plots them; ``summary.json`` holds the growth.

Growth is the slope of a least-squares line through the second half of the samples (MB per
10 minutes; the first half includes the warm-up, when instances are loaded and allocator pools
fill), beside first/last values. Per-server overhead is an actor's RSS and USS at the end against
the checkpoint file's size (target: RSS <= checkpoint + 300 MB).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from benchmarks.bench_serving_stacks import launch, load
from hetsched.slim.model.checkpoint import load_checkpoint

MB = 1024 * 1024
ACTOR_TITLE = "ray::ServerActor"
PORT = 8779


def memory_rows(front: psutil.Process, t_s: float) -> list[dict]:
    """One row per process (the front and each server actor): RSS and USS in MB now."""
    processes = [("front", front)] + [
        (f"actor-{p.pid}", p)
        for p in front.children(recursive=True)
        if ACTOR_TITLE in " ".join(p.cmdline()[:1])
    ]
    rows = []
    for name, process in processes:
        try:
            info = process.memory_full_info()
        except psutil.Error:  # an actor restarted between listing and reading
            continue
        rows.append(
            {
                "t_s": round(t_s, 1),
                "process": name,
                "rss_mb": round(info.rss / MB, 1),
                "uss_mb": round(info.uss / MB, 1),
            }
        )
    return rows


def growth_mb_per_10min(rows: list[dict], process: str, field: str) -> float:
    """Least-squares slope of ``field`` over the second half of ``process``'s samples."""
    series = [(r["t_s"], r[field]) for r in rows if r["process"] == process]
    half = series[len(series) // 2 :]
    if len(half) < 2:
        return float("nan")
    t, y = np.array(half).T
    return float(np.polyfit(t, y, 1)[0] * 600.0)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """RSS and USS over time, one line per process (matplotlib's file-only backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for axis, field in zip(axes, ("rss_mb", "uss_mb"), strict=True):
        for process in sorted({r["process"] for r in rows}):
            series = [(r["t_s"] / 60, r[field]) for r in rows if r["process"] == process]
            axis.plot(*zip(*series, strict=True), label=process)
        axis.set_xlabel("minutes")
        axis.set_ylabel(field.replace("_mb", " (MB)").upper())
        axis.grid(alpha=0.3)
    axes[0].legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="SlimResNet checkpoint")
    parser.add_argument("--minutes", type=float, default=30.0, help="soak length")
    parser.add_argument("--load-factor", type=float, default=0.8, help="offered load / capacity")
    parser.add_argument("--capacity-s", type=float, default=15.0, help="closed-loop run length")
    parser.add_argument("--interval-s", type=float, default=5.0, help="between memory samples")
    parser.add_argument("--out", type=Path, default=Path("runs/slim-serving/soak"))
    parser.add_argument("--pool", default="ray", choices=("ray", "local"), help="where servers run")
    parser.add_argument("--router", default="random", help="router name or PPO checkpoint")
    args = parser.parse_args()
    console = Console()
    args.out.mkdir(parents=True, exist_ok=True)
    data = load_checkpoint(args.checkpoint)["config"]["data"]
    checkpoint_mb = args.checkpoint.stat().st_size / MB
    rows: list[dict] = []
    chunks: list[dict] = []
    stack = "fastapi-local" if args.pool == "local" else "fastapi-actors"
    with launch(stack, args.checkpoint, args.out, PORT, 2, args.router) as front:
        url = f"http://127.0.0.1:{PORT}"
        load(url, data, 3.0, rate_per_s=20)  # warm-up: every instance loaded
        capacity = load(url, data, args.capacity_s, concurrency=32).throughput_images_per_s
        rate = args.load_factor * capacity
        console.print(
            f"capacity {capacity:.1f} img/s; soak at {rate:.1f} req/s for {args.minutes:g} min;"
            f" load average {os.getloadavg()[0]:.1f}"
        )
        start_s = time.monotonic()
        done = threading.Event()

        samples = (args.out / "samples.csv").open("w", newline="")
        writer = csv.DictWriter(samples, fieldnames=["t_s", "process", "rss_mb", "uss_mb"])
        writer.writeheader()

        def sample() -> None:  # written as they come: a soak cut short keeps its curve
            while not done.is_set():
                new_rows = memory_rows(front, time.monotonic() - start_s)
                rows.extend(new_rows)
                writer.writerows(new_rows)
                samples.flush()
                done.wait(args.interval_s)

        sampler = threading.Thread(target=sample, name="memory-sampler")
        sampler.start()
        minutes = max(1, round(args.minutes))
        try:
            with Progress(console=console) as progress:
                task = progress.add_task("soak (1-minute chunks)", total=minutes)
                for chunk in range(minutes):
                    report = load(url, data, 60.0, rate_per_s=rate, deadline_s=5.0, seed=chunk + 1)
                    chunks.append(
                        {
                            "minute": chunk + 1,
                            "sent": report.requests_sent,
                            "images_per_s": round(report.throughput_images_per_s, 1),
                            "p50_ms": round(1e3 * report.latency_s["p50"], 1),
                            "p99_ms": round(1e3 * report.latency_s["p99"], 1),
                            "errors": report.errors,
                            "load_average": round(os.getloadavg()[0], 1),
                        }
                    )
                    progress.advance(task)
        finally:
            done.set()
            sampler.join()
            samples.close()
    plot(rows, args.out / "soak.png", f"serving soak at {args.load_factor:g}x capacity")

    table = Table(title=f"Memory over {args.minutes:g} min at {args.load_factor:g}x capacity")
    for column in ("process", "RSS first / last MB", "USS first / last MB", "RSS growth MB/10 min",
                   "USS growth MB/10 min"):  # fmt: skip
        table.add_column(column, justify="right")
    processes = {}
    for process in sorted({r["process"] for r in rows}):
        series = [r for r in rows if r["process"] == process]
        processes[process] = {
            "rss_first_mb": series[0]["rss_mb"],
            "rss_last_mb": series[-1]["rss_mb"],
            "uss_first_mb": series[0]["uss_mb"],
            "uss_last_mb": series[-1]["uss_mb"],
            "rss_growth_mb_per_10min": round(growth_mb_per_10min(rows, process, "rss_mb"), 1),
            "uss_growth_mb_per_10min": round(growth_mb_per_10min(rows, process, "uss_mb"), 1),
        }
        p = processes[process]
        table.add_row(
            process,
            f"{p['rss_first_mb']:.0f} / {p['rss_last_mb']:.0f}",
            f"{p['uss_first_mb']:.0f} / {p['uss_last_mb']:.0f}",
            f"{p['rss_growth_mb_per_10min']:+.1f}",
            f"{p['uss_growth_mb_per_10min']:+.1f}",
        )
    console.print(table)
    sent = sum(c["sent"] for c in chunks)
    errors: dict[str, int] = {}
    for c in chunks:
        for status, count in c["errors"].items():
            errors[status] = errors.get(status, 0) + count
    console.print(
        f"checkpoint {checkpoint_mb:.1f} MB; {sent} requests, errors {errors or 'none'};"
        f" load average at the end {os.getloadavg()[0]:.1f}; files in {args.out}"
    )
    summary = {
        "capacity_images_per_s": capacity,
        "rate_req_per_s": rate,
        "minutes": args.minutes,
        "checkpoint_mb": checkpoint_mb,
        "processes": processes,
        "chunks": chunks,
        "errors": errors,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
