"""Speed of the whole simulated Slim cluster path: segment-requests per CPU second (issue 19).

Run: ``.venv/bin/python benchmarks/bench_slim_cluster.py [--images 4000] [--routers a,b]
[--json OUT.json]``

What is timed is exactly what training and the scenario experiments run: ``cluster.run(router)``
on a freshly built cluster of the ``lan-1.5x`` scenario (four unequal servers, 10 GbE, Poisson
arrivals) with its load set to 0.5x, 1.5x and 3x the fastest server's capacity at width 1.0: the
router's state and decision, the links, the greedy executors on the simulated devices and the
cluster's bookkeeping. Building the cluster (drawing the workload) is not timed. The figure is
segment requests completed by all executors per CPU second of the process (``time.process_time``,
so other load on the machine counts only through shared caches and cores), the best of
``--repeats`` runs. The load average before and after is printed and saved beside the figures:
on a loaded machine even CPU time runs slower, so compare figures taken under similar load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.scenario import build_cluster, with_overrides
from hetsched.slim.sim.scenario_catalog import load_scenario

LOADS = (0.5, 1.5, 3.0)
"""Mean arrival rate as a multiple of the fastest server's capacity at width 1.0."""


def segment_requests_per_cpu_s(router_name: str, load: float, images: int) -> tuple[float, int]:
    """(segment requests per CPU second, routing decisions) of one seeded run."""
    scenario = with_overrides(load_scenario("lan-1.5x"), load_factor=load, num_images=images)
    cluster = build_cluster(scenario, seed=0)
    router = ROUTERS.create(router_name, seed=0)
    start = time.process_time()
    cluster.run(router)
    elapsed = time.process_time() - start
    executors = [server for server in cluster.servers if isinstance(server, GreedyExecutor)]
    if len(executors) != len(cluster.servers):
        raise TypeError("every simulated server should be a greedy executor")
    requests = sum(executor.record.completed for executor in executors)
    return requests / elapsed, cluster.decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4000, help="images per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell (best counts)")
    parser.add_argument(
        "--routers", default="static-slimmest,least-loaded,random", help="registered routers"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    routers = [name.strip() for name in args.routers.split(",") if name.strip()]
    print(f"machine: {platform.processor() or platform.machine()}, {args.images} images per run")
    load_before = os.getloadavg()[0]
    header = " | ".join(f"{load:g}x load" for load in LOADS)
    print(f"\n| router | {header} |\n| --- |{' ---: |' * len(LOADS)}")
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for name in routers:
        cells = []
        figures[name] = {}
        for load in LOADS:
            runs = [
                segment_requests_per_cpu_s(name, load, args.images) for _ in range(args.repeats)
            ]
            rate, decisions = max(runs)
            figures[name][f"{load:g}"] = {
                "segment_requests_per_cpu_s": rate,
                "decisions": decisions,
            }
            cells.append(f"{rate / 1e3:.1f}k ({decisions / (4 * args.images):.2f} dec/seg)")
        print(f"| {name} | {' | '.join(cells)} |")
    load_after = os.getloadavg()[0]
    print(f"\nload average (1 min): {load_before:.1f} before, {load_after:.1f} after")
    if args.json is not None:
        record = {
            "images": args.images,
            "load_average": [load_before, load_after],
            "figures": figures,
        }
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
