"""RLTune training rollouts on Ray: trajectories per second with 1, 2, 4 and 8 rollout actors.

Run: ``RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/bench_jobs_rollouts.py
[--workers 1,2,4,8] [--trajectories 32] [--address auto]``

Every worker count plays the same ``--trajectories`` trajectories (epoch 1, numbers 0..N-1) of
the same untrained agent on the README's synthetic Philly scenario (12,000 jobs, 5 % of the
Philly cluster, episodes of 256 jobs), in one update, as :func:`hetsched.jobs.rl.training.
train_agent` hands them out; the in-process worker (0 actors, no Ray) is the reference. For each
count: the wall time of the batch after a warm-up trajectory per actor (actors started, torch and
the simulator loaded), trajectories per second, the speed-up over one actor, the efficiency
(speed-up / actors; the issue asks >= 0.7 at 8), the actors' summed CPU seconds, and whether
every trajectory equals the one-actor run's (it must: trajectories seed themselves from (seed,
epoch, number)). The machine's load average before and after each count is recorded beside it:
on a shared machine a wall-clock speed-up says little, and with fewer cores than actors it cannot
exceed the core count.

It also prices the paper's budget (``--paper-epochs`` x ``--paper-trajectories``, one update per
``--paper-update`` trajectories on as many actors): the in-process run times each trajectory
alone (CPU seconds), one PPO update on ``--paper-update`` of them is timed as the learner does it,
and the estimate per update is the expected slowest of ``--paper-update`` trajectories (drawn from
the measured ones) scaled by the actors' CPU per trajectory over the in-process one, plus the
update. It assumes a core per actor and no other load; it is an estimate, not a measurement.
Results go to ``--out`` as JSON and CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hetsched.jobs.rl.ray_rollouts import RayRollouts, start_ray
from hetsched.jobs.rl.rollouts import (
    RolloutWorker,
    Trajectory,
    TrajectoryTask,
    Weights,
    agent_weights,
    build_agent,
)
from hetsched.jobs.rl.scenario import load_scenario
from hetsched.jobs.rl.train_config import TrainConfig
from hetsched.jobs.rl.training import to_batch
from hetsched.rl import ppo_update


def _actor_cpu_s(rollouts: RayRollouts) -> float:
    """The actors' summed CPU seconds so far (read inside each actor process)."""
    return float(
        sum(
            ray.get(
                [a.__ray_call__.remote(lambda _w: time.process_time()) for a in rollouts.actors]
            )
        )
    )


def _same(first: list[Trajectory], second: list[Trajectory]) -> bool:
    return all(
        a.outcome == b.outcome and a.actions == b.actions and a.log_probs == b.log_probs
        for a, b in zip(first, second, strict=True)
    )


def measure(
    scenario: Any,
    config: TrainConfig,
    weights: Weights,
    workers: int,
    trajectories: int,
    address: str | None,
) -> tuple[dict[str, float], list[Trajectory]]:
    """Wall and CPU time of one batch of ``trajectories`` on ``workers`` actors (0: in process)."""
    tasks = [TrajectoryTask(1, number) for number in range(trajectories)]
    warm_up = [TrajectoryTask(0, number) for number in range(max(workers, 1))]
    load_before = os.getloadavg()[0]
    if workers == 0:
        worker = RolloutWorker(scenario.train, scenario.cluster, config)
        worker.run(weights, warm_up)
        start, played, per_trajectory_cpu_s = time.perf_counter(), [], []
        for one in tasks:  # one at a time, to price each trajectory
            cpu_start = time.process_time()
            played += worker.run(weights, [one])
            per_trajectory_cpu_s.append(time.process_time() - cpu_start)
        wall_s, cpu_s = time.perf_counter() - start, sum(per_trajectory_cpu_s)
    else:
        rollouts = RayRollouts(scenario.train, scenario.cluster, config, workers, address)
        try:
            rollouts.run(weights, warm_up)
            cpu_start, start = _actor_cpu_s(rollouts), time.perf_counter()
            played = rollouts.run(weights, tasks)
            wall_s = time.perf_counter() - start
            cpu_s = _actor_cpu_s(rollouts) - cpu_start
        finally:
            rollouts.close()
    row: dict[str, Any] = {
        "workers": workers,
        "trajectories": trajectories,
        "wall_s": wall_s,
        "trajectories_per_s": trajectories / wall_s,
        "cpu_s": cpu_s,
        "trajectories_per_cpu_s": trajectories / cpu_s,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    if workers == 0:
        row["per_trajectory_cpu_s"] = per_trajectory_cpu_s
    return row, played


def paper_estimate(
    config: TrainConfig,
    played: list[Trajectory],
    rows: list[dict[str, Any]],
    epochs: int,
    per_epoch: int,
    per_update: int,
) -> dict[str, float]:
    """Wall seconds of ``epochs`` x ``per_epoch`` trajectories, ``per_update`` per update on
    ``per_update`` actors: per update, the expected slowest of its trajectories (resampled from
    the measured ones, scaled by the actors' CPU per trajectory over the in-process one) plus the
    learner's update (timed here)."""
    torch.manual_seed(config.seed)
    agent = build_agent(config)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)
    batch = to_batch(played[:per_update], config)
    cpu_start = time.process_time()
    ppo_update(agent, optimizer, batch, config.ppo())
    update_cpu_s = time.process_time() - cpu_start
    samples = np.asarray(rows[0]["per_trajectory_cpu_s"])
    in_process = rows[0]["cpu_s"] / rows[0]["trajectories"]
    on_actors = np.mean([r["cpu_s"] / r["trajectories"] for r in rows[1:]]) if rows[1:] else 0.0
    actor_overhead = max(on_actors / in_process, 1.0)
    draws = np.random.default_rng(config.seed).choice(samples, size=(2000, per_update))
    slowest_s = float(draws.max(axis=1).mean()) * actor_overhead
    updates = epochs * -(-per_epoch // per_update)
    return {
        "epochs": epochs,
        "trajectories_per_epoch": per_epoch,
        "trajectories_per_update": per_update,
        "actors": per_update,
        "trajectory_cpu_s_mean": float(samples.mean()),
        "trajectory_cpu_s_max": float(samples.max()),
        "actor_cpu_over_in_process": actor_overhead,
        "expected_slowest_of_update_s": slowest_s,
        "update_cpu_s": update_cpu_s,
        "estimated_wall_s": updates * (slowest_s + update_cpu_s),
        "serial_cpu_s": epochs * per_epoch * float(samples.mean()) + updates * update_cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8", help="Actor counts to measure.")
    parser.add_argument("--trajectories", type=int, default=32, help="Trajectories per count.")
    parser.add_argument("--episode-jobs", type=int, default=256, help="Jobs per episode.")
    parser.add_argument("--address", default=None, help="Ray cluster (default: a local session).")
    parser.add_argument("--paper-epochs", type=int, default=100, help="Budget to price: epochs.")
    parser.add_argument(
        "--paper-trajectories",
        type=int,
        default=100,
        help="Budget to price: trajectories per epoch.",
    )
    parser.add_argument(
        "--paper-update",
        type=int,
        default=16,
        help="Budget to price: trajectories per update (= actors).",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/jobs/bench-rollouts"))
    args = parser.parse_args()
    counts = [int(c) for c in args.workers.split(",")]
    torch.set_num_threads(1)  # as the command line and the actors run
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a loopback-only local session
    console = Console()
    scenario = load_scenario(
        None, synthetic="philly", synthetic_jobs=12000, cluster_fraction=0.05, train_fraction=0.9
    )
    config = TrainConfig(episode_jobs=args.episode_jobs, seed=0)
    torch.manual_seed(config.seed)
    weights = agent_weights(build_agent(config))  # one agent for every count
    owns_ray = start_ray(args.address, max(counts))
    rows: list[dict[str, float]] = []
    reference: list[Trajectory] | None = None
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rollouts", total=len(counts) + 1)
        for workers in [0, *counts]:
            progress.update(task, description=f"{workers} actors" if workers else "in process")
            row, played = measure(
                scenario, config, weights, workers, args.trajectories, args.address
            )
            reference = reference or played
            row["identical_to_in_process"] = float(_same(reference, played))
            rows.append(row)
            progress.advance(task)
    if owns_ray:
        ray.shutdown()
    assert reference is not None
    estimate = paper_estimate(
        config,
        reference,
        rows,
        args.paper_epochs,
        args.paper_trajectories,
        min(args.paper_update, args.trajectories),
    )
    one = next((r for r in rows if r["workers"] == 1), None)
    for row in rows:
        if one is not None and row["workers"] >= 1:
            row["speedup"] = row["trajectories_per_s"] / one["trajectories_per_s"]
            row["efficiency"] = row["speedup"] / row["workers"]
    cores = os.cpu_count() or 0
    title = (
        f"{args.trajectories} trajectories of {args.episode_jobs} jobs (synthetic Philly, 5 %"
        f" slice) on {cores} cores"
    )
    table = Table(title=title)
    columns = ("actors", "wall s", "traj/s", "speed-up", "efficiency", "CPU s", "load", "same")
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["workers"]) if row["workers"] else "in process",
            f"{row['wall_s']:.1f}",
            f"{row['trajectories_per_s']:.2f}",
            f"{row['speedup']:.2f}" if "speedup" in row else "",
            f"{row['efficiency']:.2f}" if "efficiency" in row else "",
            f"{row['cpu_s']:.1f}",
            f"{row['load_before']:.1f}-{row['load_after']:.1f}",
            "yes" if row["identical_to_in_process"] else "NO",
        )
    console.print(table)
    console.print(
        f"paper budget ({estimate['epochs']} x {estimate['trajectories_per_epoch']} trajectories,"
        f" {estimate['trajectories_per_update']} per update on as many actors), estimated:"
        f" {estimate['estimated_wall_s'] / 3600:.2f} h wall (trajectory"
        f" {estimate['trajectory_cpu_s_mean']:.2f} s CPU mean, slowest of an update"
        f" {estimate['expected_slowest_of_update_s']:.2f} s, update {estimate['update_cpu_s']:.2f}"
        f" s); one core: {estimate['serial_cpu_s'] / 3600:.2f} h"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"cores": cores, "machine": platform.platform(), "address": args.address}
    (args.out / "rollouts.json").write_text(
        json.dumps({**meta, "rows": rows, "paper_estimate": estimate}, indent=2)
    )
    with (args.out / "rollouts.csv").open("w", newline="") as handle:
        fields = sorted({k for r in rows for k in r} - {"per_trajectory_cpu_s"})
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    console.print(f"saved in {args.out}: rollouts.json, rollouts.csv")


if __name__ == "__main__":
    main()
