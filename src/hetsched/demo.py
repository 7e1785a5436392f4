"""`make demo`: the main job end to end on embedded data, as a short sequence of steps.

1. Train the slimmable SlimResNet on scikit-learn's digits (no download), upsampled to 16x16:
   the digits are 8x8, so 16x16 loses nothing and costs a quarter of 32x32 on two CPU cores.
2. Measure top-1 of all 256 per-segment width tuples on the test split (the accuracy table).
3. Print the paper's Tables I and II beside the measured numbers.
4. Route: in the simulated paper cluster (2x RTX 2080 Ti + GTX 980 Ti, Wi-Fi 5, bursty arrivals)
   with the accuracy table just measured, train a PPO-efficiency and a PPO-balanced router briefly
   and print Tables III-V against the paper's random baseline and the constant best-server rule
   (every segment on the fastest server at full width), the strongest simple rule in this
   scenario (the full run is ``hetsched slim experiment``; the scenario comparison with every
   rule is ``hetsched slim experiment --scenarios``).

Every artefact lands under ``out`` (``out/model``: checkpoint, cost table, accuracy table;
``out/router``: router checkpoints, training curves, results JSON and plots).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.rule import Rule

from hetsched.slim.experiments.router_experiment import run_experiment
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.pipeline import measure_with_progress, paper_tables, train_with_progress
from hetsched.slim.model.train import TrainConfig
from hetsched.slim.router_training.trainer import ppo_budget
from hetsched.slim.sim.scenario import ScenarioConfig


@dataclass(frozen=True)
class DemoBudget:
    """How much work each demo step does (the defaults are what ``make demo`` runs)."""

    data: str = "digits:16"
    """The digits are 8x8: 16x16 loses nothing and costs a quarter of 32x32 on two CPU cores."""
    epochs: int = 6
    limit_images: int | None = None
    """Use only the first N train and test images (tests use a handful)."""
    router_decisions: int = 8_000
    """Training decisions per router: a quarter of ``hetsched slim experiment``'s default."""
    router_images: int = 500
    """Images per routing workload (training episode and evaluation run)."""


def run_demo(out: Path, budget: DemoBudget = DemoBudget()) -> None:
    """Runs every demo step, writing artefacts under ``out``."""
    console = Console()
    model_dir = Path(out) / "model"

    console.print(Rule("1. Slim Scheduler model: train SlimResNet (sandwich rule, distillation)"))
    dataset = load_dataset(budget.data).limited(budget.limit_images)
    model, _history = train_with_progress(
        dataset, TrainConfig(epochs=budget.epochs), model_dir, console=console
    )

    console.print(Rule("2. Accuracy table: all 256 width tuples on the test split"))
    table = measure_with_progress(model, dataset, model_dir, console=console)

    console.print(Rule("3. Tables I and II beside the paper (paper: CIFAR-100; here: digits)"))
    for rich_table in paper_tables(table):
        console.print(rich_table)

    console.print(Rule("4. Routing: PPO routers vs random and the constant best-server rule"))
    torch.set_num_threads(1)
    scenario = ScenarioConfig(
        accuracy_table=str(model_dir / "accuracy_table.json"), num_images=budget.router_images
    )
    ppo = ppo_budget(budget.router_decisions)
    run_experiment(
        scenario,
        [0],
        Path(out) / "router",
        ppo=ppo,
        baselines=("random", "constant-best"),
        console=console,
    )
