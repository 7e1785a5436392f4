"""Live capacity of live servers: images per second a saturated live Slim cluster completes.

Issue 19, item 6 scales the live scenarios' load to what the live servers can serve (the
simulated scenarios' rates are for simulated GPUs). This measures it the way
:mod:`hetsched.slim.sim.capacity` measures a simulated server: every image arrives at once
(a saturating burst), each server takes them in its largest group at one fixed width
(join-the-shortest-queue at that width), and the capacity is images over the time from the burst
to the last completion. The servers are live ``TorchBackend`` executors on this machine (one per
device named, ``cpu`` or ``cuda[:N]``; a GPU and a CPU server make a heterogeneous pair), so the
figure includes the contention of whatever else runs here: the output records the load average
and this process's CPU time beside the wall time.

    python benchmarks/bench_slim_live_capacity.py --checkpoint runs/slim-model/checkpoint.pt \
        --devices "cpu;cpu,cpu" --widths 1.0,0.25 --images 600 --out runs/live-capacity.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from hetsched.core.entry import run_reporting_user_errors
from hetsched.slim.live.cluster import LiveSetup
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster

BURST_RATE_PER_S = 1e6
"""Arrival rate of the burst: every image is waiting before the first batch ends."""


def live_capacity_per_s(
    checkpoint: Path, devices: tuple[str, ...], width: float, images: int, seed: int = 0
) -> float:
    """Images per second live servers on ``devices`` complete, saturated at ``width``."""
    scenario = ScenarioConfig(
        servers=("cpu",) * len(devices),
        link="loopback",
        arrival="poisson",
        rate_per_s=BURST_RATE_PER_S,
        num_images=images,
    )
    router = ROUTERS.create(f"jsq-{width}", seed=seed)
    setup = LiveSetup.open(checkpoint, len(devices), scenario.widths, devices)
    cluster = build_cluster(scenario, seed, live=setup)
    try:
        cluster.run(router)
    finally:
        cluster.close()
    first_s = min(cluster.arrival_times_s)
    last_s = max(image.finished_s for image in cluster.completed)
    return len(cluster.completed) / (last_s - first_s)


def main() -> None:
    """Parses the options, measures every (devices, width) cell, prints and saves the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument(
        "--devices",
        default="cpu;cpu,cpu",
        help="Clusters to measure, ';'-separated; each a comma-separated device per server.",
    )
    parser.add_argument("--widths", default="1.0,0.25", help="Comma-separated widths.")
    parser.add_argument("--images", type=int, default=600, help="Images in each burst.")
    parser.add_argument("--out", type=Path, default=Path("runs/live-capacity.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = Table(title="live capacity (images/s, saturated, one fixed width)")
    for column in ("devices", "width", "images/s", "wall s", "CPU s", "load avg (1 min)"):
        table.add_column(column, justify="right")
    rows = []
    for cluster_devices in args.devices.split(";"):
        devices = tuple(device.strip() for device in cluster_devices.split(","))
        for width in (float(w) for w in args.widths.split(",")):
            wall_start_s, cpu_start_s = time.perf_counter(), time.process_time()
            capacity = live_capacity_per_s(args.checkpoint, devices, width, args.images)
            wall_s = time.perf_counter() - wall_start_s
            cpu_s = time.process_time() - cpu_start_s
            load = os.getloadavg()[0]
            rows.append(
                {"servers": len(devices), "devices": list(devices), "width": width,
                 "images_per_s": capacity, "wall_s": wall_s, "cpu_s": cpu_s, "load_avg_1min": load}
            )  # fmt: skip
            table.add_row(
                ",".join(devices), f"{width:g}", f"{capacity:.1f}", f"{wall_s:.1f}", f"{cpu_s:.1f}",
                f"{load:.1f}",
            )  # fmt: skip
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"checkpoint": str(args.checkpoint), "rows": rows}, indent=1))
    Console().print(f"results: {args.out}")


if __name__ == "__main__":
    run_reporting_user_errors(main)
