"""RLTune decision latency: features + actor forward + MILP placement, for queues of 128-1024 jobs.

Run: ``.venv/bin/python benchmarks/bench_jobs_decision.py [--repeats 50] [--cluster philly]``

One decision = build the Table 3 features of the whole queue (eqs. 1-3, sampling to 8), run the
shared per-job actor over it, take the top job, and place it with the MILP placer (look-ahead
K = 8 jobs). The agent sees the whole queue here (``max_queue`` = queue length) so the cost of
longer queues shows; the default MAX_QUEUE_SIZE = 256 caps it in practice. Settings: the whole
cluster ~70 % busy with random running jobs, and a 5 % slice 90 % busy, where look-ahead jobs
compete for the candidates' nodes and the solver runs (HiGHS, then GLPK through cvxopt). The
queue holds synthetic Philly jobs. Targets: <= 2 ms at 256 jobs, <= 10 ms at 1024. torch runs on
one thread (per-decision tensors are tiny). "MILP placement" is the placer's whole call
(candidates, problem, solve); the next column is over the decisions that called the solver. The
paper reports 0.7 ms (state + forward) and 0.2 ms (CVXPY) nominal.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from hetsched.jobs.cluster.catalog import CLUSTERS
from hetsched.jobs.cluster.slicing import slice_cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.milp import MILPPlacer
from hetsched.jobs.placement.placers import JobRequest, PackPlacer
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.agent import JobScoringAgent
from hetsched.jobs.rl.features import build_features
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.synthetic import generate

QUEUE_SIZES = (128, 256, 512, 1024)


def busy_state(cluster, rng: np.random.Generator, share: float = 0.7) -> ClusterState:
    """Fills ``share`` of the GPUs with random 1-8 GPU jobs placed by pack."""
    state = ClusterState(cluster)
    everywhere = np.ones(len(cluster.nodes), dtype=bool)
    while state.busy_gpus < share * cluster.total_gpus:
        gpus = int(rng.choice([1, 1, 1, 2, 4, 8]))
        allocation = PackPlacer().place(JobRequest(gpus, 4.0 * gpus, 0.0, everywhere), state)
        if allocation is None:
            break
        state.allocate(allocation)
    return state


def request_of(jobs, index: int, cluster) -> JobRequest:
    eligible = cluster.type_mask(jobs.gpu_types[index]) & cluster.vc_mask(None)
    return JobRequest(
        int(jobs.num_gpus[index]), float(jobs.cpus[index]), float(jobs.memory_mib[index]), eligible
    )


def measure(
    cluster, queue_size: int, repeats: int, seed: int, busy_share: float, solver: str
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    jobs = fill_requested_times(generate("philly", queue_size, seed=seed), "noisy", seed)
    codes, names = jobs.user_codes()
    torch.manual_seed(seed)
    agent = JobScoringAgent(max_queue=queue_size)
    placer = MILPPlacer(lookahead_jobs=8, solver=solver)
    features_ms, forward_ms, place_ms, solver_ms, total_ms = [], [], [], [], []
    for _ in range(repeats):
        state = busy_state(cluster, rng, busy_share)
        now = float(jobs.submit_time_s[-1]) + 60.0
        queue = QueueState(
            jobs, np.arange(queue_size), now, cluster, state, UsageHistory(len(names)), codes
        )
        t0 = time.perf_counter()
        features = build_features(queue, queue_size)
        t1 = time.perf_counter()
        priorities = agent.priorities(features)
        order = np.argsort(-np.where(features.can_start, priorities, -np.inf), kind="stable")
        t2 = time.perf_counter()
        head = int(order[0])
        placer.set_lookahead([request_of(jobs, int(j), cluster) for j in order[1:9]])
        calls = placer.solver_calls
        placer.place(request_of(jobs, head, cluster), state)
        t3 = time.perf_counter()
        features_ms.append(1e3 * (t1 - t0))
        forward_ms.append(1e3 * (t2 - t1))
        place_ms.append(1e3 * (t3 - t2))
        total_ms.append(1e3 * (t3 - t0))
        if placer.solver_calls > calls:
            solver_ms.append(1e3 * (t3 - t2))
    return {
        "features_ms": float(np.median(features_ms)),
        "forward_ms": float(np.median(forward_ms)),
        "place_ms": float(np.median(place_ms)),
        "solver_ms": float(np.median(solver_ms)) if solver_ms else float("nan"),
        "solver_share": len(solver_ms) / repeats,
        "total_ms": float(np.median(total_ms)),
        "total_p90_ms": float(np.percentile(total_ms, 90)),
        "total_min_ms": float(np.min(total_ms)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50, help="decisions per queue size")
    parser.add_argument("--cluster", default="philly", help="built-in cluster name")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    full = CLUSTERS.create(args.cluster)
    small = slice_cluster(full, 0.05)
    settings = (
        (full, 0.7, "highs", "whole cluster, 70 % busy, HiGHS"),
        (small, 0.9, "highs", "5 % slice, 90 % busy (contended: the solver runs), HiGHS"),
        (small, 0.9, "glpk", "5 % slice, 90 % busy, GLPK through cvxopt"),
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, python"
        f" {platform.python_version()}, torch {torch.__version__}; {args.repeats} decisions each"
    )
    for cluster, share, solver, label in settings:
        print(f"\n{cluster.name} ({len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs): {label}")
        print(
            "\n| queue | features (ms) | actor forward (ms) | MILP placement (ms) | decisions that"
            " called the solver | with a solve (ms) | total median | total p90 | total min |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for size in QUEUE_SIZES:
            m = measure(cluster, size, args.repeats, args.seed, share, solver)
            print(
                f"| {size} | {m['features_ms']:.2f} | {m['forward_ms']:.2f} | {m['place_ms']:.2f}"
                f" | {100 * m['solver_share']:.0f} % | {m['solver_ms']:.2f} | {m['total_ms']:.2f} |"
                f" {m['total_p90_ms']:.2f} | {m['total_min_ms']:.2f} |"
            )


if __name__ == "__main__":
    main()
