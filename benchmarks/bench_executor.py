"""Simulator speed: segment requests per second of the greedy executor on the simulated backend.

Run: ``.venv/bin/python benchmarks/bench_executor.py [--duration-s 5] [--profile]``

One server (RTX 2080 Ti twin, default executor knobs) under seeded Poisson streams of random
segment requests at several rates, from light load (batches of about one request) to overload
(full batches of B_max). Wall time covers the whole simulation on one core: the arrivals
(replayed: the loop runs up to each arrival, no event per request), the executor (Algorithm 1),
the backend's contention model, batch-end events, telemetry and the idle unloader; generating
the workload's arrays is excluded. Best of ``--repeats`` runs per rate (by CPU time); requests
per CPU second is the one-core speed, requests per wall second what a shared machine gave (the
load average before and after says how shared). ``--profile`` then prints the top functions of
a cProfile run at each rate.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import time

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.sim.scenario import model_costs
from hetsched.slim.sim.simulated_backend import SimulatedBackend
from hetsched.slim.sim.workload import SegmentWorkload, replay, segment_workload

RATES_PER_S = (2_000, 10_000, 20_000, 50_000)
"""Light, moderate, near saturation (~23k/s for this device and mix), overload."""


def simulate(
    workload: SegmentWorkload, config: ExecutorConfig
) -> tuple[float, float, GreedyExecutor]:
    """Runs the workload to the end; returns (CPU seconds, wall seconds, the executor)."""
    loop = EventLoop()
    executor = GreedyExecutor(
        SimulatedBackend(DEVICES["rtx-2080-ti"], model_costs(), loop), loop, config
    )
    done_count = [0]

    def done(_width: float) -> None:
        done_count[0] += 1

    start_cpu, start_wall = time.process_time(), time.perf_counter()
    replay(workload, executor, loop, done)
    while loop.step():
        pass
    cpu_s, wall_s = time.process_time() - start_cpu, time.perf_counter() - start_wall
    assert done_count[0] == len(workload), "requests lost"
    return cpu_s, wall_s, executor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=5.0, help="simulated seconds per rate")
    parser.add_argument("--repeats", type=int, default=3, help="runs per rate; the best counts")
    parser.add_argument("--profile", action="store_true", help="cProfile one run per rate")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("rate/s  requests  batch  util%  p99 ms   CPU s  wall s  per CPU s  per wall s")
    for rate in RATES_PER_S:
        config = ExecutorConfig(arrival_rate_per_s=rate)
        workload = segment_workload(0, rate, "poisson", args.duration_s, config.widths)
        cpu_s, wall_s, executor = min(
            (simulate(workload, config) for _ in range(args.repeats)), key=lambda run: run[0]
        )
        record = executor.record
        series = record.series
        utilization = sum(series.utilization_pct) / max(1, len(series.utilization_pct))
        print(
            f"{rate:>6}  {len(workload):>8}  {record.completed / record.batches:5.2f}"
            f"  {utilization:5.1f}  {1e3 * record.latency_summary().p99:7.1f}"
            f"  {cpu_s:6.2f}  {wall_s:6.2f}  {len(workload) / cpu_s:>9,.0f}"
            f"  {len(workload) / wall_s:>10,.0f}"
        )
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.profile:
        for rate in RATES_PER_S:
            config = ExecutorConfig(arrival_rate_per_s=rate)
            workload = segment_workload(0, rate, "poisson", args.duration_s, config.widths)
            profiler = cProfile.Profile()
            profiler.enable()
            simulate(workload, config)
            profiler.disable()
            print(f"--- profile at {rate}/s ({len(workload)} requests)")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
