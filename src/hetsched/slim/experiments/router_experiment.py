"""The paper's 3-GPU experiment (Tables III-V) as one function: train, evaluate, tabulate, plot.

For each seed: train a PPO router with the ``efficiency`` preset (Table IV regime) and one with the
``balanced`` preset (Table V regime) on training episodes of the scenario, then run the random
baseline (Table III) and both routers on the same evaluation workload of that seed. Aggregate over
seeds (mean and spread), print each table beside the paper's figures, save JSON and plots.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from hetsched.rl import PPOConfig
from hetsched.slim.experiments.report import (
    RunMetrics,
    aggregate,
    paper_table,
    results_console,
    run_metrics,
)
from hetsched.slim.live.cluster import LiveSetup
from hetsched.slim.router_training.trainer import PAPER_PPO, TrainedRouter, train_router
from hetsched.slim.routers import ROUTERS, Router
from hetsched.slim.routers.ppo import PPORouter
from hetsched.slim.routers.reward import RewardWeights, reward_weights
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster, encoder_for, mean_top1

TRAINING_SEED_OFFSET = 10_000
"""Training episodes draw workloads from seeds offset by this, so no evaluation workload is seen."""

PPO_PRESETS = ("efficiency", "balanced")


def evaluate_router(
    scenario: ScenarioConfig, router: Router, seed: int, *, live: LiveSetup | None = None
) -> RunMetrics:
    """Runs ``router`` on the scenario's workload for ``seed`` and returns the table metrics.

    With ``live`` the cluster's servers run the model on real devices in wall-clock time.
    """
    cluster = build_cluster(scenario, seed, live=live)
    try:
        start_s = cluster.clock.now_s()
        cluster.run(router)
        return run_metrics(cluster, start_s)
    finally:
        cluster.close()


def router_named(name: str, seed: int) -> tuple[str, Router]:
    """A router from a registry name (``random``, ``round-robin``, ...) or a PPO checkpoint file,
    with the label its results go under (a checkpoint's file stem)."""
    path = Path(name)
    if path.suffix == ".pt" or path.is_file():
        return path.stem, ROUTERS.create("ppo", checkpoint=path, seed=seed)
    return name, ROUTERS.create(name, seed=seed)


def evaluate_routers(
    scenario: ScenarioConfig,
    names: list[str],
    seeds: list[int],
    out_dir: Path,
    *,
    live: LiveSetup | None = None,
    console: Console | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Evaluates each router on every seed's workload, prints a Table III-V style table per router
    (Δ against ``random`` when it came first) and writes ``OUT/results.json``."""
    console = console or results_console()
    if live is not None:
        console.print(live.describe())
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        runs = []
        label = name
        for seed in seeds:
            label, router = router_named(name, seed)
            runs.append(evaluate_router(scenario, router, seed, live=live))
        results[label] = aggregate(runs)
        console.print(paper_table(label, results[label], results.get("random"), len(seeds)))
    if live is not None:
        console.print(live.energy_note())
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    console.print(f"results: {out_dir / 'results.json'}")
    return results


def training_clusters(scenario: ScenarioConfig, seed: int) -> Callable[[int], Any]:
    """Episode factory for training: each episode a fresh workload (seeded, disjoint from eval)."""
    return lambda episode_seed: build_cluster(
        scenario, TRAINING_SEED_OFFSET + seed * 1_000 + episode_seed % 1_000
    )


def train_scenario_router(
    scenario: ScenarioConfig,
    weights: RewardWeights,
    ppo: PPOConfig,
    out_dir: Path,
    *,
    name: str,
    preset: str,
) -> TrainedRouter:
    """Trains one PPO router on the scenario's training episodes (seeded by ``ppo.seed``), with a
    progress bar; writes its checkpoint and training curves under ``out_dir``."""
    return train_router(
        training_clusters(scenario, ppo.seed),
        encoder_for(scenario),
        weights,
        ppo,
        mean_top1=mean_top1(scenario),
        out_dir=out_dir,
        name=name,
        metadata={"preset": preset, "scenario": scenario.model_dump()},
        progress=True,
    )


@dataclass
class ExperimentResult:
    """Per-policy runs and aggregates, as saved to ``results.json``."""

    runs: dict[str, list[RunMetrics]]
    aggregated: dict[str, dict[str, dict[str, float]]]
    histories: dict[str, list[dict[str, float]]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": {k: [r.as_dict() for r in v] for k, v in self.runs.items()},
            "aggregated": self.aggregated,
            "training_histories": self.histories,
        }


def run_experiment(
    scenario: ScenarioConfig,
    seeds: list[int],
    out_dir: Path,
    *,
    ppo: PPOConfig = PAPER_PPO,
    baselines: tuple[str, ...] = ("random",),
    live: LiveSetup | None = None,
    console: Console | None = None,
    progress: bool = True,
) -> ExperimentResult:
    """Trains the two PPO routers per seed, evaluates everything, prints Tables III-V.

    ``live`` evaluates on the live backend (real devices, wall clock); training always runs in the
    simulator, since a PPO budget of thousands of decisions is only affordable there.
    """
    console = console or results_console()
    if live is not None:
        console.print(live.describe())
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[RunMetrics]] = {name: [] for name in baselines}
    runs.update({f"ppo-{preset}": [] for preset in PPO_PRESETS})
    histories: dict[str, list[dict[str, float]]] = {}
    encoder = encoder_for(scenario)
    for seed in seeds:
        for name in baselines:
            console.print(f"seed {seed}: evaluating {name}")
            runs[name].append(
                evaluate_router(scenario, ROUTERS.create(name, seed=seed), seed, live=live)
            )
        for preset in PPO_PRESETS:
            console.print(f"seed {seed}: training ppo-{preset} ({ppo.total_timesteps} decisions)")
            trained = train_router(
                training_clusters(scenario, seed),
                encoder,
                reward_weights(preset),
                ppo.model_copy(update={"seed": seed}),
                mean_top1=mean_top1(scenario),
                out_dir=out_dir / "routers",
                name=f"ppo-{preset}-seed{seed}",
                metadata={"preset": preset, "scenario": scenario.model_dump()},
                progress=progress,
            )
            histories[f"ppo-{preset}-seed{seed}"] = trained.history
            router = PPORouter(policy=trained.policy, encoder=encoder, seed=seed)
            runs[f"ppo-{preset}"].append(evaluate_router(scenario, router, seed, live=live))
    aggregated = {name: aggregate(policy_runs) for name, policy_runs in runs.items()}
    result = ExperimentResult(runs, aggregated, histories)
    baseline = aggregated.get("random")
    for name in runs:
        console.print(
            paper_table(name, aggregated[name], baseline if name != "random" else None, len(seeds))
        )
    world = {"backend": "simulated"}
    if live is not None:
        console.print(live.energy_note())
        world = {"backend": "live", "setup": live.describe(), "energy": live.energy_note()}
    (out_dir / "results.json").write_text(
        json.dumps(
            {"scenario": scenario.model_dump(), "seeds": seeds, **world, **result.as_dict()},
            indent=1,
        )
    )
    plot_comparison(runs, out_dir / "comparison.png")
    console.print(f"results: {out_dir / 'results.json'}; plots: {out_dir}")
    return result


def plot_comparison(runs: dict[str, list[RunMetrics]], path: Path) -> None:
    """Bar charts of accuracy, mean latency and mean energy per policy (error bars: seed spread)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(runs)
    panels = [
        ("accuracy (%)", lambda r: r.accuracy_pct),
        ("mean latency per image (s)", lambda r: r.latency_s.mean),
        ("mean energy per image (J)", lambda r: r.energy_j.mean),
        ("utilisation variance", lambda r: r.utilization_variance.mean),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for axis, (label, get) in zip(axes, panels, strict=True):
        values = [[get(r) for r in runs[name]] for name in names]
        axis.bar(names, [np.mean(v) for v in values], yerr=[np.std(v) for v in values], capsize=3)
        axis.set_title(label, fontsize=9)
        axis.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
