"""RLTune simulator at production-trace scale: jobs per CPU-second at 10k, 100k and 450k jobs.

Run: ``.venv/bin/python benchmarks/bench_jobs_scale.py [--sizes 10000,100000,450000] [--repeats 3]``

Generates a seeded RICC-like SWF (:data:`hetsched.jobs.traces.hpc_synthetic.RICC_LIKE`: 8,192
cores, 450,000 jobs over about five months, many small and short jobs, bulk submissions) into a
temporary folder (the file is not kept), loads it with the SWF loader, and replays the first N
jobs under FCFS with EASY backfilling for each size. The cost is CPU time of building and running
the simulator (``time.process_time``), so other work on the machine inflates it less than wall
time. A simulator whose cost is linear in the trace keeps jobs per CPU-second flat across sizes
at equal load; the load itself varies along the trace (weeks with 20,000 jobs waiting), so
``--windows-at`` also replays windows of the first size from other places of the trace (rebased,
on an empty machine): equal throughput there says the cost does not grow with the position in
the trace. Results go to ``--out`` as JSON and CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim.config import QueueMode, SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.hpc_synthetic import RICC_LIKE, generate_hpc_trace
from hetsched.jobs.traces.swf import load_swf, write_swf


def measure(jobs, cluster, policy: str, mode: QueueMode, repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` runs: CPU seconds (set-up and run), passes and the schedule's
    headline metrics (the same every time: the simulator is deterministic)."""
    cpu_s = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        result = Simulator(jobs, cluster, make_policy(policy), SimulationConfig(mode)).run()
        cpu_s = min(cpu_s, time.process_time() - start)
    summary = result.summary()
    return {
        "jobs": len(jobs),
        "cpu_s": cpu_s,
        "jobs_per_cpu_s": len(jobs) / cpu_s,
        "passes": result.passes,
        "mean_queue": float(np.sum(result.wait_s) / result.makespan_s),
        "bsld": summary["bsld"],
        "utilisation_pct": summary["utilisation_pct"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,450000", help="prefix sizes, jobs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated trace")
    parser.add_argument("--policy", default="fcfs")
    parser.add_argument("--mode", default="easy", help="queue mode")
    parser.add_argument("--repeats", type=int, default=1, help="best of N runs per row")
    parser.add_argument(
        "--windows-at", default="200000,440000", help="starts of windows of the first size"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/jobs_scale"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    console = Console()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ricc_like.swf"
        t0 = time.process_time()
        write_swf(generate_hpc_trace(max(sizes), args.seed), path, RICC_LIKE.cores)
        generate_s = time.process_time() - t0
        t0 = time.process_time()
        trace = load_swf(path)
        load_s = time.process_time() - t0
    assert trace.cluster is not None  # the header gives the machine
    console.print(
        f"generated {max(sizes)} jobs ({generate_s:.1f} s CPU), loaded in {load_s:.1f} s CPU;"
        f" machine {platform.processor() or platform.machine()}, python"
        f" {platform.python_version()}"
    )
    starts = [int(s) for s in args.windows_at.split(",") if s]
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=len(sizes) + len(starts))
        for size in sizes:
            jobs = trace.jobs.take(np.arange(size))
            row = measure(jobs, trace.cluster, args.policy, args.mode, args.repeats)
            rows.append({"first_job": 0, **row})
            progress.advance(task)
        for start in starts:
            jobs = trace.jobs.window(start, sizes[0])
            row = measure(jobs, trace.cluster, args.policy, args.mode, args.repeats)
            rows.append({"first_job": start, **row})
            progress.advance(task)
    table = Table(title=f"{args.policy} + {args.mode} on a RICC-like trace (seed {args.seed})")
    for column in ("from job", "jobs", "CPU s", "jobs / CPU s", "passes", "mean queue", "BSLD"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            f"{r['first_job']:,}",
            f"{r['jobs']:,}",
            f"{r['cpu_s']:.1f}",
            f"{r['jobs_per_cpu_s']:,.0f}",
            f"{r['passes']:,}",
            f"{r['mean_queue']:.1f}",
            f"{r['bsld']:.2f}",
        )
    console.print(table)
    ratio = rows[len(sizes) - 1]["jobs_per_cpu_s"] / rows[0]["jobs_per_cpu_s"]
    console.print(f"jobs per CPU-second at {sizes[-1]:,} / at {sizes[0]:,}: {ratio:.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {
        "seed": args.seed,
        "policy": args.policy,
        "mode": args.mode,
        "repeats": args.repeats,
        "load_cpu_s": load_s,
    }
    payload = {**settings, "rows": rows, "ratio_last_first": ratio}
    (args.out / "results.json").write_text(json.dumps(payload, indent=2))
    with (args.out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    console.print(f"saved in {args.out}: results.json, results.csv")


if __name__ == "__main__":
    main()
