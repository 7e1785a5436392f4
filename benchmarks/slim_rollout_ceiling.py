"""What switching between the advisor rules can reach at all: the rollout teacher as a router.

Run: ``.venv/bin/python benchmarks/slim_rollout_ceiling.py --scenarios bursty-3x,diurnal-1g
[--seeds 5] [--first-seed 0] [--chunk 400] [--horizon 0] [--futures sampled --samples 4]
[--out runs/rollout-ceiling.json]``

Issue 19 asks the learned router (which picks one of the advisor rules at every decision) for
>= 99 % SLO attainment at >= 3 points of accuracy above the slimmest static width on bursty-3x.
This script measures an upper reference for any such router: the
:class:`~hetsched.slim.router_training.teachers.RolloutTeacher` *driving* the cluster, so at
every chunk of decisions it follows the advisor whose rollout (a copy of the cluster run ahead,
which knows the arrivals to come) scores best. No router can know the future, so a bar this
clairvoyant switcher misses is out of reach of switching between these rules. Each run is scored
like ``hetsched slim experiment`` scores it (steady-state window, same evaluation seeds 0..N-1),
beside every advisor run alone on the same seed.

``--futures sampled`` takes the foresight away: each rollout runs on ``--samples`` futures drawn
from the scenario's arrival process given only what a router sees at that moment
(:class:`~hetsched.slim.sim.future_arrivals.FutureSampler`), so the switcher is an online
(model-predictive) router, and what it gains over the rules is what a router that learned to
switch from the present could gain.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import get_args

from rich.console import Console
from rich.table import Table

from hetsched.core.entry import run_reporting_user_errors
from hetsched.core.errors import ConfigError
from hetsched.core.metrics import mean_and_ci95
from hetsched.slim.experiments.scenario_experiment import evaluate_window
from hetsched.slim.experiments.slo_metrics import EnergyProbe, window_metrics
from hetsched.slim.router_training.teachers import RolloutTeacher
from hetsched.slim.router_training.validation import TeacherChoice, TeacherPick
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.slo_features import DEFAULT_ADVISORS
from hetsched.slim.sim.future_arrivals import FutureSampler
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster
from hetsched.slim.sim.scenario_catalog import load_scenarios
from hetsched.slim.sim.workload import window_bounds

FUTURES = ("workload", "sampled")
"""What the rollouts see ahead: the episode's own arrivals, or draws from its process."""


def rollout_run(
    scenario: ScenarioConfig,
    seed: int,
    chunk: int,
    horizon: int | None,
    choice: TeacherChoice,
    samples: int,
) -> tuple[float, float]:
    """(SLO attainment %, accuracy %) on the evaluation window of the rollout-driven run
    (``samples`` 0: rollouts on the workload's own future; else on that many drawn ones)."""
    cluster = build_cluster(scenario, seed)
    start_s, end_s = window_bounds(cluster.arrival_times_s, scenario.warmup_fraction)
    probe = EnergyProbe(cluster, start_s, end_s)
    futures = FutureSampler(scenario) if samples else None
    teacher = RolloutTeacher(
        DEFAULT_ADVISORS, seed, chunk, TeacherPick(choice), horizon, futures, max(1, samples)
    )
    decision = 0
    while (state := cluster.next_state()) is not None:
        _name, rule = teacher.teacher(decision, cluster)
        cluster.route(rule.decide(state))
        decision += 1
    metrics = window_metrics(cluster, probe, start_s, end_s)
    return 100 * metrics.slo_attainment, metrics.accuracy_pct


def _rule_run(scenario: ScenarioConfig, seed: int, name: str) -> tuple[float, float]:
    """(SLO attainment %, accuracy %) of one advisor alone, as the experiment scores it."""
    metrics = evaluate_window(scenario, ROUTERS.create(name, seed=seed), seed)
    return 100 * metrics.slo_attainment, metrics.accuracy_pct


def _cell(values: list[float]) -> str:
    mean, half = mean_and_ci95(values)
    return f"{mean:.2f} ± {half:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="bursty-3x")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0, help="0: evaluation seeds 0..N-1")
    parser.add_argument("--chunk", type=int, default=400, help="decisions per rollout chunk")
    parser.add_argument("--horizon", type=int, default=0, help="decisions per rollout; 0: to end")
    parser.add_argument("--choice", default="score", choices=get_args(TeacherChoice))
    parser.add_argument("--futures", default="workload", choices=FUTURES)
    parser.add_argument("--samples", type=int, default=4, help="futures per rollout (sampled)")
    parser.add_argument("--out", type=Path, default=Path("runs/rollout-ceiling.json"))
    args = parser.parse_args()
    if args.seeds < 2 or args.chunk < 1 or args.horizon < 0 or 0 < args.horizon < args.chunk:
        raise ConfigError("need --seeds >= 2, --chunk >= 1 and --horizon 0 or >= --chunk")
    if args.samples < 1 or args.first_seed < 0:
        raise ConfigError("need --samples >= 1 and --first-seed >= 0")
    samples = args.samples if args.futures == "sampled" else 0
    rollout = f"rollout ({'clairvoyant' if not samples else f'{samples} sampled futures'})"
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    scenarios = load_scenarios([name for name in args.scenarios.split(",") if name])
    console = Console()
    report: dict[str, dict[str, dict[str, list[float]]]] = {}
    for name, scenario in scenarios.items():
        table = Table(title=f"{name}: SLO attainment % / accuracy %, mean ± 95 % CI over seeds")
        for column in ("policy", "SLO attainment %", "accuracy %"):
            table.add_column(column)
        runs: dict[str, dict[str, list[float]]] = {}
        for policy in (*DEFAULT_ADVISORS, rollout):
            pairs = [
                rollout_run(scenario, seed, args.chunk, args.horizon or None, args.choice, samples)
                if policy == rollout
                else _rule_run(scenario, seed, policy)
                for seed in seeds
            ]
            runs[policy] = {
                "slo_attainment_pct": [a for a, _ in pairs],
                "accuracy_pct": [b for _, b in pairs],
            }
            table.add_row(
                policy,
                _cell(runs[policy]["slo_attainment_pct"]),
                _cell(runs[policy]["accuracy_pct"]),
            )
        console.print(table)
        report[name] = runs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {"seeds": list(seeds), "chunk": args.chunk, "horizon": args.horizon,
                "choice": args.choice, "futures": args.futures, "samples": samples}  # fmt: skip
    args.out.write_text(json.dumps({"settings": settings, "scenarios": report}, indent=1))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    run_reporting_user_errors(main)
