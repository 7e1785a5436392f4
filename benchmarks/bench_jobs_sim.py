"""RLTune simulator speed: a 10,000-job trace under FCFS + EASY, and scaling with queue length.

Run: ``.venv/bin/python benchmarks/bench_jobs_sim.py [--repeats 3]``

1. ``lublin_256.swf`` (10,000 jobs, 256-slot pool) under FCFS with EASY backfilling — target
   <= 5 s on the 2-core development machine — plus greedy and strict for reference.
2. Scaling with queue length: the same trace with arrivals compressed by 1x..8x (the same jobs
   arrive faster, so the waiting queue grows); mean queue length by Little's law
   (sum of waits / makespan), wall time and microseconds per scheduling pass.
3. A 10,000-job synthetic Helios trace on the multi-node Helios VCs (EASY, FCFS and SJF).
Needs ``../shared/data`` for parts 1-2 (skipped with a message when absent).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from hetsched.jobs.cluster.catalog import CLUSTERS
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim.config import QueueMode, SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces import load_trace
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.synthetic import generate

LUBLIN = Path(__file__).resolve().parents[1] / "../shared/data/traces/lublin_256.swf"


def timed(jobs, cluster, policy: str, mode: QueueMode, repeats: int):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = Simulator(jobs, cluster, make_policy(policy), SimulationConfig(mode)).run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    if LUBLIN.is_file():
        trace = load_trace(LUBLIN)
        jobs = fill_requested_times(trace.jobs, "user-history", seed=0)
        print("\n| trace | policy | mode | jobs | passes | wall (s) | jobs/s |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        for mode in ("easy", "greedy", "strict"):
            wall, r = timed(jobs, trace.cluster, "fcfs", mode, args.repeats)
            print(f"| lublin_256 | fcfs | {mode} | {len(jobs)} | {r.passes} | {wall:.2f} |"
                  f" {len(jobs) / wall:.0f} |")  # fmt: skip
        print("\n| arrival compression | mean queue length | passes | wall (s) | us/pass |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for factor in (1, 2, 4, 8):
            fast = jobs.with_columns(submit_time_s=jobs.submit_time_s / factor)
            wall, r = timed(fast, trace.cluster, "fcfs", "easy", 1)
            queue = float(np.sum(r.wait_s) / r.makespan_s)
            print(f"| {factor}x | {queue:.1f} | {r.passes} | {wall:.2f} |"
                  f" {1e6 * wall / r.passes:.0f} |")  # fmt: skip
    else:
        print(f"skipping lublin parts: {LUBLIN} not found")
    helios = fill_requested_times(generate("helios", 10000, seed=0, arrival_scale=2.0), "auto")
    cluster = CLUSTERS.create("helios")
    print("\n| trace | policy | mode | jobs | passes | mean queue | wall (s) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for policy in ("fcfs", "sjf"):
        wall, r = timed(helios, cluster, policy, "easy", 1)
        queue = float(np.sum(r.wait_s) / r.makespan_s)
        row = f"| synthetic helios x2 | {policy} | easy | {len(helios)} | {r.passes} |"
        print(f"{row} {queue:.1f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
