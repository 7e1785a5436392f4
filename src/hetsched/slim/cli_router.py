"""``hetsched slim`` router commands: scenarios, train-router, evaluate-router, experiment."""

from __future__ import annotations

from pathlib import Path

import torch
import typer
from rich.console import Console

from hetsched.core.config import load_config, validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.cli_options import (
    ACCURACY_OPT,
    CHECKPOINT_OPT,
    EXACT_WIDTH_OPT,
    IMAGES_OPT,
    LIVE_DEVICES_OPT,
    RATE_OPT,
    SCENARIO_OPT,
    SLO_OPT,
    check_overrides,
    comma_list,
    live_from_options,
    names,
    scenario_from_options,
)
from hetsched.slim.experiments.router_experiment import (
    evaluate_routers,
    run_experiment,
    train_scenario_router,
)
from hetsched.slim.experiments.scenario_experiment import (
    experiment_routers,
    run_scenario_experiment,
)
from hetsched.slim.router_training.learned_training import (
    LearnedRouterConfig,
    learned_router_table,
    train_learned_router,
)
from hetsched.slim.router_training.trainer import ppo_budget
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.reward import RewardWeights, reward_weights
from hetsched.slim.sim.scenario import ScenarioConfig, with_exact_width, with_overrides
from hetsched.slim.sim.scenario_catalog import (
    load_scenario,
    load_scenarios,
    scenario_names,
    summarize_scenario,
)


def register(app: typer.Typer) -> None:
    """Adds the router commands to the ``hetsched slim`` app (in ``--help`` order)."""
    app.command("scenarios")(scenarios_command)
    app.command("train-router")(train_router_command)
    app.command("evaluate-router")(evaluate_router_command)
    app.command("experiment")(experiment_command)


def scenarios_command() -> None:
    """Lists the shipped scenarios with the load and capacities the device model gives them."""
    console = Console(soft_wrap=True)
    for name in scenario_names():
        console.print(
            summarize_scenario(name, load_scenario(name)).line(),
            highlight=False,
        )


def train_router_command(
    method: str = typer.Option(
        "learned",
        help="learned: behaviour cloning of the best rule per episode + DAgger over the training"
        " scenarios, choosing which rule to follow; ppo: the paper's PPO on one scenario.",
    ),
    preset: str | None = typer.Option(
        None,
        help="Reward preset: slo (default for learned), efficiency (default for ppo), balanced.",
    ),
    reward: Path | None = typer.Option(
        None, help="ppo: YAML with reward weights (overrides preset)."
    ),
    steps: int | None = typer.Option(
        None, help="PPO decisions (default: none after DAgger for learned, 30000 for ppo)."
    ),
    rollout: int = typer.Option(1024, help="Decisions per PPO update."),
    seed: int = typer.Option(0),
    out: Path = typer.Option(Path("runs/router"), help="Folder for checkpoints and curves."),
    scenarios: str | None = typer.Option(
        None,
        "--scenarios",
        help="learned: comma-separated training scenarios (default: every shipped one not held"
        " out; held-out ones are refused).",
    ),
    advisors: str | None = typer.Option(
        None,
        help="learned: comma-separated rules seen as features and cloned (default: 6 rules);"
        " a rule may carry numeric settings: 'backlog-width(threshold_s=0.012)'.",
    ),
    action: str | None = typer.Option(
        None,
        help="learned: advice (default: which advisor rule to follow at each decision) or"
        " placement (the joint server-width head and the group size).",
    ),
    advantage: str | None = typer.Option(
        None,
        help="learned: PPO advantage: one_step (default, Slim eq. 8) or gae (charges a decision"
        " for the later deadline misses it causes).",
    ),
    teacher: str | None = typer.Option(
        None,
        help="learned: rule to clone: per-episode (default: each demonstration episode's best"
        " advisor), rollout (per chunk of decisions, the advisor whose rollout of the cluster"
        " ahead scores best), best (the best on validation), or a rule name.",
    ),
    rollout_chunk: int | None = typer.Option(
        None, help="learned: decisions per chunk of the rollout teacher (default 400)."
    ),
    rollout_horizon: int | None = typer.Option(
        None,
        help="learned: decisions per rollout of the rollout teacher (default 1200; 0: to the"
        " end of the episode, several times slower).",
    ),
    rollout_futures: str | None = typer.Option(
        None,
        help="learned: what the rollout teacher's copies see ahead: workload (default: the"
        " episode's own arrivals, clairvoyant) or sampled (futures drawn from the scenario's"
        " arrival process given only the present).",
    ),
    rollout_samples: int | None = typer.Option(
        None, help="learned: drawn futures per candidate and chunk with sampled (default 4)."
    ),
    teacher_choice: str | None = typer.Option(
        None,
        help="learned: with per-episode or rollout teachers, attainment-target (default: the"
        " most accurate rule within half a point of the episode's best attainment, counting"
        " every rule that meets 99 % of the deadlines), score (attainment + half the accuracy)"
        " or attainment-first (without the 99 % target).",
    ),
    teacher_tolerance: float | None = typer.Option(
        None,
        help="learned: attainment below an episode's best that still counts as meeting it"
        " (default 0.005: half a point).",
    ),
    teacher_target: float | None = typer.Option(
        None,
        help="learned: with attainment-target, the share of deadlines that counts as meeting"
        " the SLO (default 0.99).",
    ),
    demo_episodes: int | None = typer.Option(None, help="learned: demonstration episodes."),
    dagger_rounds: int | None = typer.Option(
        None,
        help="learned: DAgger rounds after cloning (the policy drives fresh episodes, the"
        " teachers label its states, it is cloned again; default 3).",
    ),
    resume: bool = typer.Option(
        False, help="learned: continue from OUT/train-state.pt (same settings; --steps may grow)."
    ),
    scenario_name: str | None = SCENARIO_OPT,
    images: int | None = IMAGES_OPT,
    accuracy_table: str | None = ACCURACY_OPT,
    exact_width: bool | None = EXACT_WIDTH_OPT,
) -> None:
    """Trains a router in the simulated cluster; writes checkpoints and learning curves."""
    torch.set_num_threads(1)
    if images is not None and images < 1:
        raise ConfigError(f"--images: expected at least 1 image, got {images}")
    if method == "ppo":
        learned_only = (
            scenarios, advisors, action, advantage, teacher, teacher_choice, teacher_tolerance,
            teacher_target, rollout_chunk, rollout_horizon, rollout_futures, rollout_samples,
            demo_episodes, dagger_rounds, resume,
        )  # fmt: skip
        if any(option is not None and option is not False for option in learned_only):
            raise ConfigError(
                "--scenarios, --advisors, --action, --advantage, --teacher, --teacher-choice,"
                " --teacher-tolerance, --teacher-target, --rollout-chunk, --rollout-horizon,"
                " --rollout-futures, --rollout-samples,"
                " --demo-episodes, --dagger-rounds and --resume apply to --method learned"
            )
        _train_paper_router(
            preset or "efficiency", reward, steps or 30_000, rollout, seed, out,
            scenario_from_options(scenario_name, images, accuracy_table, exact_width=exact_width),
        )  # fmt: skip
        return
    if method != "learned":
        raise ConfigError(f"--method: expected learned or ppo, got {method!r}")
    if scenario_name is not None or reward is not None:
        raise ConfigError("--scenario and --reward apply to --method ppo (learned: --scenarios)")
    updates = {
        "scenarios": None if scenarios is None else names(scenarios),
        "advisors": None if advisors is None else names(advisors),
        "action": action,
        "advantage": advantage,
        "teacher": teacher,
        "teacher_choice": teacher_choice,
        "teacher_tolerance": teacher_tolerance,
        "teacher_target": teacher_target,
        "rollout_chunk": rollout_chunk,
        "rollout_horizon": rollout_horizon,
        "rollout_futures": rollout_futures,
        "rollout_samples": rollout_samples,
        "preset": preset,
        "images": images,
        "ppo_steps": steps,
        "rollout": rollout,
        "demo_episodes": demo_episodes,
        "dagger_rounds": dagger_rounds,
        "seed": seed,
        "exact_width": exact_width,
        "accuracy_table": accuracy_table,
    }
    if rollout_horizon is not None and rollout_horizon < 0:
        raise ConfigError(
            f"--rollout-horizon: expected 0 (to the episode's end) or more, got {rollout_horizon}"
        )
    settings: dict[str, object] = {k: v for k, v in updates.items() if v is not None}
    if rollout_horizon == 0:
        settings["rollout_horizon"] = None  # to the end of the episode
    config = validate_config(settings, LearnedRouterConfig, "command line")
    console = Console()
    result = train_learned_router(config, out, resume=resume, console=console)
    console.print(learned_router_table(result))
    console.print(f"router: {result.checkpoint}; curves: {out / 'learned-curves.png'}")


def _train_paper_router(
    preset: str,
    reward: Path | None,
    steps: int,
    rollout: int,
    seed: int,
    out: Path,
    scenario: ScenarioConfig,
) -> None:
    """The paper's PPO router on one scenario (``--method ppo``)."""
    weights = load_config(reward, RewardWeights) if reward else reward_weights(preset)
    name = f"ppo-{preset if reward is None else reward.stem}"
    trained = train_scenario_router(
        scenario, weights, ppo_budget(steps, rollout, seed), out, name=name, preset=preset
    )
    last = trained.history[-1] if trained.history else {}
    mean_return = last.get("charts/mean_return", float("nan"))
    Console().print(
        f"trained {steps} decisions; last mean return {mean_return:.4f};"
        f" checkpoint {trained.checkpoint}"
    )


def evaluate_router_command(
    routers: list[str] = typer.Argument(
        ..., help="Router names (random, round-robin, ...) and/or PPO checkpoint files."
    ),
    seeds: str = typer.Option("0,1,2", help="Comma-separated evaluation seeds."),
    out: Path = typer.Option(Path("runs/router-eval"), help="Folder for results.json."),
    live: bool = typer.Option(False, help="Use the live backend (real devices, wall clock)."),
    checkpoint: Path | None = CHECKPOINT_OPT,
    live_devices: str | None = LIVE_DEVICES_OPT,
    scenario_name: str | None = SCENARIO_OPT,
    images: int | None = IMAGES_OPT,
    accuracy_table: str | None = ACCURACY_OPT,
    rate: float | None = RATE_OPT,
) -> None:
    """Evaluates routers on seeded workloads and prints Table III-V style tables."""
    torch.set_num_threads(1)
    scenario = scenario_from_options(scenario_name, images, accuracy_table, rate)
    seed_list = comma_list("--seeds", seeds, int)
    scenario, setup = live_from_options(scenario, live, checkpoint, live_devices, accuracy_table)
    evaluate_routers(scenario, routers, seed_list, out, live=setup)


def experiment_command(
    seeds: str | None = typer.Option(
        None,
        help="Comma-separated seeds (paper experiment; default 0,1,2). With --scenarios also N"
        " for seeds 0..N-1 (default 5).",
    ),
    scenarios: str | None = typer.Option(
        None,
        "--scenarios",
        help="Comma-separated scenarios (names from `hetsched slim scenarios` or YAML files):"
        " evaluate every registered router on each (mean ± 95 % CI, Pareto plots) instead of"
        " the paper's experiment; with --live on the live backend.",
    ),
    routers: str | None = typer.Option(
        None,
        help="With --scenarios: comma-separated routers (default: every registered one);"
        " a rule may carry numeric settings: 'backlog-width(threshold_s=0.012)'.",
    ),
    router_checkpoint: list[str] = typer.Option(
        [],
        "--router-checkpoint",
        help="With --scenarios: NAME=PATH, the checkpoint of learned router NAME (repeatable);"
        " without one, learned runs the router the package ships and ppo is skipped.",
    ),
    steps: int = typer.Option(30_000, help="Training decisions per PPO router (paper experiment)."),
    baselines: str = typer.Option(
        "random",
        help="Comma-separated baseline routers of the paper experiment (random first: the Δ"
        " columns use it).",
    ),
    out: Path = typer.Option(Path("runs/slim-experiment"), help="Folder for JSON and plots."),
    live: bool = typer.Option(False, help="Evaluate on the live backend (devices found here)."),
    checkpoint: Path | None = CHECKPOINT_OPT,
    live_devices: str | None = LIVE_DEVICES_OPT,
    scenario_name: str | None = SCENARIO_OPT,
    images: int | None = IMAGES_OPT,
    accuracy_table: str | None = ACCURACY_OPT,
    rate: float | None = RATE_OPT,
    slo_ms: float | None = SLO_OPT,
    exact_width: bool | None = EXACT_WIDTH_OPT,
) -> None:
    """The paper's experiment (random vs PPO-efficiency vs PPO-balanced, Tables III-V), or with
    --scenarios every router on every named scenario."""
    torch.set_num_threads(1)
    if scenarios is not None:
        if scenario_name is not None or rate is not None:
            raise ConfigError("--scenarios runs named scenarios at their own rates; drop"
                              " --scenario and --rate")  # fmt: skip
        chosen = load_scenarios(names(scenarios))
        overrides = {"num_images": images, "accuracy_table": accuracy_table, "slo_ms": slo_ms}
        check_overrides(images, slo_ms)
        opened = {
            name: live_from_options(
                with_exact_width(with_overrides(scenario, **overrides), exact_width),
                live, checkpoint, live_devices, accuracy_table,
            )
            for name, scenario in chosen.items()
        }  # fmt: skip
        chosen_routers = None if routers is None else names(routers)
        factories, skipped = experiment_routers(chosen_routers, _checkpoints(router_checkpoint))
        setups = {name: setup for name, (_, setup) in opened.items() if setup is not None}
        run_scenario_experiment(
            {name: scenario for name, (scenario, _) in opened.items()},
            _seed_count_or_list(seeds), out, factories, skipped, live=setups or None,
        )  # fmt: skip
        return
    scenario = scenario_from_options(
        scenario_name, images, accuracy_table, rate, slo_ms, exact_width
    )
    names_paper = tuple(names(baselines))
    for name in names_paper:
        ROUTERS.get(name)  # an unknown name fails here, before any training
    seed_list = comma_list("--seeds", seeds or "0,1,2", int)
    scenario, setup = live_from_options(scenario, live, checkpoint, live_devices, accuracy_table)
    run_experiment(
        scenario, seed_list, out, ppo=ppo_budget(steps), baselines=names_paper, live=setup
    )


def _seed_count_or_list(text: str | None) -> list[int]:
    """``--seeds`` of the scenario evaluation: N (seeds 0..N-1) or a comma-separated list."""
    seeds = comma_list("--seeds", text or "5", int)
    if len(seeds) == 1 and "," not in (text or "5"):
        if seeds[0] < 1:
            raise ConfigError(f"--seeds: expected a positive number of seeds, got {seeds[0]}")
        return list(range(seeds[0]))
    return seeds


def _checkpoints(items: list[str]) -> dict[str, Path]:
    """``--router-checkpoint NAME=PATH`` items as a mapping."""
    checkpoints = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(f"--router-checkpoint: expected NAME=PATH, got {item!r}")
        checkpoints[name.strip()] = Path(path.strip())
    return checkpoints
