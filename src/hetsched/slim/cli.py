"""`hetsched slim` sub-commands: options in, library calls, results printed."""

from __future__ import annotations

from pathlib import Path
from typing import cast, get_args

import torch
import typer
from rich.console import Console

from hetsched.core.config import load_config, validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.experiments.router_experiment import (
    evaluate_routers,
    run_experiment,
    train_scenario_router,
)
from hetsched.slim.experiments.run_server import report_table, run_server, save_run
from hetsched.slim.experiments.scenario_experiment import (
    experiment_routers,
    run_scenario_experiment,
)
from hetsched.slim.live.cluster import LiveSetup, open_live_scenario
from hetsched.slim.live.profile import model_to_profile, run_profile
from hetsched.slim.live.profile_cells import describe_cell
from hetsched.slim.live.profile_fit import fit_table
from hetsched.slim.live.profile_plots import plot_profile
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.pipeline import measure_checkpoint, paper_tables, train_with_progress
from hetsched.slim.model.train import TrainConfig
from hetsched.slim.router_training.learned_training import (
    LearnedRouterConfig,
    learned_router_table,
    train_learned_router,
)
from hetsched.slim.router_training.trainer import ppo_budget
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.reward import RewardWeights, reward_weights
from hetsched.slim.serving.cli import register as register_serving
from hetsched.slim.sim.scenario import ScenarioConfig, with_overrides
from hetsched.slim.sim.scenario_catalog import (
    load_scenario,
    load_scenarios,
    scenario_names,
    summarize_scenario,
)
from hetsched.slim.sim.workload import Pattern

app = typer.Typer(no_args_is_help=True)


def _comma_list(option: str, text: str, kind: type[float] | type[int]) -> list:
    """``text`` split at commas into ``kind`` values; a bad item is a one-line error naming
    ``option``."""
    try:
        return [kind(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"{option}: expected comma-separated numbers, got {text!r}") from None


def _check_overrides(images: int | None, slo_ms: float | None) -> None:
    """One-line errors for command-line overrides no scenario can take."""
    if images is not None and images < 1:
        raise ConfigError(f"--images: expected at least 1 image, got {images}")
    if slo_ms is not None and slo_ms <= 0:
        raise ConfigError(f"--slo-ms: expected a positive SLO in milliseconds, got {slo_ms:g}")


def _with_exact_width(scenario: ScenarioConfig, exact_width: bool) -> ScenarioConfig:
    """The scenario with exact-width execution switched on when ``--exact-width`` was given."""
    if not exact_width:
        return scenario
    executor = scenario.executor.model_copy(update={"exact_width": True})
    return scenario.model_copy(update={"executor": executor})


def _scenario(
    name: str | None,
    images: int | None,
    accuracy_table: str | None,
    rate_per_s: float | None = None,
    slo_ms: float | None = None,
    exact_width: bool = False,
) -> ScenarioConfig:
    """A shipped scenario or a YAML file (default: ``paper``) with command-line overrides."""
    if rate_per_s is not None and rate_per_s <= 0:
        raise ConfigError(f"--rate: expected a positive rate in images/s, got {rate_per_s:g}")
    _check_overrides(images, slo_ms)
    scenario = with_overrides(
        load_scenario(name or "paper"),
        num_images=images,
        accuracy_table=accuracy_table,
        rate_per_s=rate_per_s,
        slo_ms=slo_ms,
    )
    return _with_exact_width(scenario, exact_width)


def _live(
    scenario: ScenarioConfig,
    live: bool,
    checkpoint: Path | None,
    devices: str | None,
    accuracy: str | None,
) -> tuple[ScenarioConfig, LiveSetup | None]:
    """The options of ``--live`` checked and opened (None without it), before any work."""
    if not live:
        if checkpoint is not None or devices is not None:
            raise ConfigError("--checkpoint and --live-devices only apply with --live")
        return scenario, None
    if checkpoint is None:
        raise ConfigError(
            "--live needs --checkpoint CKPT: the live backend runs a trained SlimResNet"
            " (written by `hetsched slim train`)"
        )
    names = None if devices is None else [d.strip() for d in devices.split(",") if d.strip()]
    return open_live_scenario(
        scenario, checkpoint, names, accuracy_table_given=accuracy is not None
    )


_SCENARIO_OPT = typer.Option(
    None,
    "--scenario",
    help="A shipped scenario (hetsched slim scenarios) or a scenario YAML (default: paper).",
)
_IMAGES_OPT = typer.Option(None, "--images", help="Images per workload (episode).")
_ACCURACY_OPT = typer.Option(
    None, "--accuracy-table", help="'paper' (Tables I/II) or a measured accuracy-table JSON."
)
_RATE_OPT = typer.Option(
    None, "--rate", help="Mean arrival rate in images/s (live: what the devices can serve)."
)
_SLO_OPT = typer.Option(
    None, "--slo-ms", help="Latency SLO of every image in ms (default: the scenario's)."
)
_EXACT_WIDTH_OPT = typer.Option(
    False,
    "--exact-width",
    help="Run each request at exactly its routed width (default: the paper's FINDFREEBESTFIT,"
    " which may run it on a wider free instance).",
)
_CHECKPOINT_OPT = typer.Option(
    None, "--checkpoint", help="With --live: the SlimResNet checkpoint the servers run."
)
_LIVE_DEVICES_OPT = typer.Option(
    None,
    "--live-devices",
    help="With --live: comma-separated devices, one per server (cpu, cuda:N); default: one per"
    " CUDA device, else the scenario's server count on cpu.",
)


# -- router and experiment -------------------------------------------------------------------------


@app.command("scenarios")
def scenarios_command() -> None:
    """Lists the shipped scenarios with the load and capacities the device model gives them."""
    console = Console(soft_wrap=True)
    for name in scenario_names():
        console.print(summarize_scenario(name, load_scenario(name)).line(), highlight=False)


@app.command("train-router")
def train_router_command(
    method: str = typer.Option(
        "learned",
        help="learned: behaviour cloning from the best rule + PPO fine-tuning over the training"
        " scenarios, extended features, SLO reward; ppo: the paper's PPO on one scenario.",
    ),
    preset: str | None = typer.Option(
        None,
        help="Reward preset: slo (default for learned), efficiency (default for ppo), balanced.",
    ),
    reward: Path | None = typer.Option(
        None, help="ppo: YAML with reward weights (overrides preset)."
    ),
    steps: int | None = typer.Option(
        None, help="PPO decisions (default: 120000 fine-tuning for learned, 30000 for ppo)."
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
        None, help="learned: comma-separated rules seen as features and cloned (default: 5 rules)."
    ),
    teacher: str | None = typer.Option(
        None,
        help="learned: rule to clone: best (default: the advisor with the best validation"
        " score), per-episode, or a rule name.",
    ),
    demo_episodes: int | None = typer.Option(None, help="learned: demonstration episodes."),
    resume: bool = typer.Option(
        False, help="learned: continue from OUT/train-state.pt (same settings; --steps may grow)."
    ),
    scenario_name: str | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
) -> None:
    """Trains a router in the simulated cluster; writes checkpoints and learning curves."""
    torch.set_num_threads(1)
    if images is not None and images < 1:
        raise ConfigError(f"--images: expected at least 1 image, got {images}")
    if method == "ppo":
        if scenarios or advisors or teacher or demo_episodes is not None or resume:
            raise ConfigError(
                "--scenarios, --advisors, --teacher, --demo-episodes and --resume apply to"
                " --method learned"
            )
        _train_paper_router(
            preset or "efficiency", reward, steps or 30_000, rollout, seed, out,
            _scenario(scenario_name, images, accuracy_table),
        )  # fmt: skip
        return
    if method != "learned":
        raise ConfigError(f"--method: expected learned or ppo, got {method!r}")
    if scenario_name is not None or reward is not None or accuracy_table is not None:
        raise ConfigError(
            "--scenario, --reward and --accuracy-table apply to --method ppo (learned: --scenarios)"
        )
    updates = {
        "scenarios": None if scenarios is None else _names(scenarios),
        "advisors": None if advisors is None else _names(advisors),
        "teacher": teacher,
        "preset": preset,
        "images": images,
        "ppo_steps": steps,
        "rollout": rollout,
        "demo_episodes": demo_episodes,
        "seed": seed,
    }
    config = validate_config(
        {k: v for k, v in updates.items() if v is not None}, LearnedRouterConfig, "command line"
    )
    console = Console()
    result = train_learned_router(config, out, resume=resume, console=console)
    console.print(learned_router_table(result))
    console.print(f"router: {result.checkpoint}; curves: {out / 'learned-curves.png'}")


def _names(text: str) -> list[str]:
    """Comma-separated names, blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


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


@app.command("evaluate-router")
def evaluate_router_command(
    routers: list[str] = typer.Argument(
        ..., help="Router names (random, round-robin, ...) and/or PPO checkpoint files."
    ),
    seeds: str = typer.Option("0,1,2", help="Comma-separated evaluation seeds."),
    out: Path = typer.Option(Path("runs/router-eval"), help="Folder for results.json."),
    live: bool = typer.Option(False, help="Use the live backend (real devices, wall clock)."),
    checkpoint: Path | None = _CHECKPOINT_OPT,
    live_devices: str | None = _LIVE_DEVICES_OPT,
    scenario_name: str | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
    rate: float | None = _RATE_OPT,
) -> None:
    """Evaluates routers on seeded workloads and prints Table III-V style tables."""
    torch.set_num_threads(1)
    scenario = _scenario(scenario_name, images, accuracy_table, rate)
    seed_list = _comma_list("--seeds", seeds, int)
    scenario, setup = _live(scenario, live, checkpoint, live_devices, accuracy_table)
    evaluate_routers(scenario, routers, seed_list, out, live=setup)


@app.command("experiment")
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
        None, help="With --scenarios: comma-separated routers (default: every registered one)."
    ),
    router_checkpoint: list[str] = typer.Option(
        [],
        "--router-checkpoint",
        help="With --scenarios: NAME=PATH, the checkpoint of learned router NAME (repeatable);"
        " learned routers without one are skipped.",
    ),
    steps: int = typer.Option(30_000, help="Training decisions per PPO router (paper experiment)."),
    baselines: str = typer.Option(
        "random",
        help="Comma-separated baseline routers of the paper experiment (random first: the Δ"
        " columns use it).",
    ),
    out: Path = typer.Option(Path("runs/slim-experiment"), help="Folder for JSON and plots."),
    live: bool = typer.Option(False, help="Evaluate on the live backend (devices found here)."),
    checkpoint: Path | None = _CHECKPOINT_OPT,
    live_devices: str | None = _LIVE_DEVICES_OPT,
    scenario_name: str | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
    rate: float | None = _RATE_OPT,
    slo_ms: float | None = _SLO_OPT,
    exact_width: bool = _EXACT_WIDTH_OPT,
) -> None:
    """The paper's experiment (random vs PPO-efficiency vs PPO-balanced, Tables III-V), or with
    --scenarios every router on every named scenario."""
    torch.set_num_threads(1)
    if scenarios is not None:
        if scenario_name is not None or rate is not None:
            raise ConfigError("--scenarios runs named scenarios at their own rates; drop"
                              " --scenario and --rate")  # fmt: skip
        chosen = load_scenarios([name.strip() for name in scenarios.split(",") if name.strip()])
        overrides = {"num_images": images, "accuracy_table": accuracy_table, "slo_ms": slo_ms}
        _check_overrides(images, slo_ms)
        opened = {
            name: _live(
                _with_exact_width(with_overrides(scenario, **overrides), exact_width),
                live, checkpoint, live_devices, accuracy_table,
            )
            for name, scenario in chosen.items()
        }  # fmt: skip
        names = None if routers is None else [r.strip() for r in routers.split(",") if r.strip()]
        factories, skipped = experiment_routers(names, _checkpoints(router_checkpoint))
        setups = {name: setup for name, (_, setup) in opened.items() if setup is not None}
        run_scenario_experiment(
            {name: scenario for name, (scenario, _) in opened.items()},
            _seed_count_or_list(seeds), out, factories, skipped, live=setups or None,
        )  # fmt: skip
        return
    scenario = _scenario(scenario_name, images, accuracy_table, rate, slo_ms, exact_width)
    names_paper = tuple(name.strip() for name in baselines.split(",") if name.strip())
    for name in names_paper:
        ROUTERS.get(name)  # an unknown name fails here, before any training
    seed_list = _comma_list("--seeds", seeds or "0,1,2", int)
    scenario, setup = _live(scenario, live, checkpoint, live_devices, accuracy_table)
    run_experiment(
        scenario, seed_list, out, ppo=ppo_budget(steps), baselines=names_paper, live=setup
    )


def _seed_count_or_list(text: str | None) -> list[int]:
    """``--seeds`` of the scenario evaluation: N (seeds 0..N-1) or a comma-separated list."""
    seeds = _comma_list("--seeds", text or "5", int)
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


# -- model: training and accuracy table ------------------------------------------------------------


@app.command("train")
def train_command(
    data: str = typer.Option(
        "digits", help="digits (32x32), digits:SIZE, or cifar100:PATH (a cifar-100-python folder)."
    ),
    epochs: int = typer.Option(5, help="Passes over the training split."),
    batch_size: int = typer.Option(32, help="Images per step."),
    optimizer: str = typer.Option("adamw", help="adamw or sgd (Nesterov momentum 0.9)."),
    lr: float = typer.Option(2e-3, help="Peak learning rate of the cosine schedule."),
    weight_decay: float = typer.Option(0.05, help="Weight decay."),
    random_tuples: int = typer.Option(2, help="Random width tuples per step (sandwich rule)."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    seed: int = typer.Option(0, help="Seed of weights, batches and width draws."),
    limit: int | None = typer.Option(None, help="Use only the first N train and test images."),
    resume: bool = typer.Option(False, help="Continue from OUT/checkpoint.pt."),
    out: Path = typer.Option(Path("runs/slim-model"), help="Folder for checkpoint and costs."),
) -> None:
    """Trains the slimmable SlimResNet (sandwich rule, in-place distillation, cosine LR)."""
    knobs = {
        "epochs": epochs,
        "batch_size": batch_size,
        "optimizer": optimizer,
        "lr": lr,
        "weight_decay": weight_decay,
        "random_tuples": random_tuples,
        "seed": seed,
    }
    config = validate_config(knobs, TrainConfig, "command line")
    dataset = load_dataset(data).limited(limit)
    train_with_progress(dataset, config, out, device=device, resume=resume)


@app.command("accuracy")
def accuracy_command(
    checkpoint: Path = typer.Option(..., help="A checkpoint written by `hetsched slim train`."),
    out: Path = typer.Option(Path("runs/slim-model"), help="Folder for accuracy_table.json."),
    data: str | None = typer.Option(None, help="Data set (default: the one trained on)."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    batch_size: int = typer.Option(128, help="Test images per batch."),
    limit: int | None = typer.Option(None, help="Use only the first N test images."),
) -> None:
    """Measures top-1 of all 256 width tuples; prints Tables I/II beside the paper's numbers."""
    console = Console()
    table = measure_checkpoint(
        checkpoint,
        out,
        data=data,
        device=device,
        batch_size=batch_size,
        limit_images=limit,
        console=console,
    )
    for rich_table in paper_tables(table):
        console.print(rich_table)


# -- executor: device profile (live backend) -------------------------------------------------------


@app.command("profile")
def profile_command(
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N."),
    checkpoint: Path | None = typer.Option(
        None, help="A SlimResNet checkpoint (default: random weights; latency does not care)."
    ),
    batch_sizes: str = typer.Option("1,2,4,8,16,32", help="Comma-separated batch sizes."),
    widths: str = typer.Option("0.25,0.5,0.75,1.0", help="Comma-separated widths."),
    image_size: int = typer.Option(32, help="Side of the square input images."),
    min_time: float = typer.Option(0.2, help="Seconds of timed forwards per cell (at least 3)."),
    passes: int = typer.Option(3, help="Round-robin passes over the cells (the fastest counts)."),
    threads: int | None = typer.Option(None, help="torch CPU threads (default: torch's)."),
    name: str | None = typer.Option(None, help="Profile name (default: cpu-<threads>core / GPU)."),
    out: Path = typer.Option(Path("runs/profiles"), help="Folder for NAME.json and the plots."),
) -> None:
    """Measures a device over batch sizes and widths; writes a profile the simulator loads."""
    if threads is not None:
        torch.set_num_threads(threads)
    model = model_to_profile(checkpoint)
    console = Console()
    console.print(f"profiling {device} ({torch.get_num_threads()} torch threads)")
    sizes = _comma_list("--batch-sizes", batch_sizes, int)
    result = run_profile(
        model,
        device,
        sizes,
        _comma_list("--widths", widths, float),
        out,
        name=name,
        image_size=image_size,
        min_time_s=min_time,
        passes=passes,
        on_cell=lambda cell: (
            console.print(describe_cell(cell)) if cell.batch_size == max(sizes) else None
        ),
    )
    plots = plot_profile(result.cells, out, result.spec.name, result.energy_source)
    console.print(fit_table(result.fit, result.spec.name))
    console.print(f"energy: {result.energy_explanation}")
    console.print(f"profile: {result.json_path}")
    console.print(f"plots: {', '.join(str(p) for p in plots)}")


# -- executor: one server under a generated workload -----------------------------------------------


@app.command("run-server")
def run_server_command(
    sim: bool = typer.Option(False, "--sim", help="Run the simulated twin of the device."),
    device: str = typer.Option("rtx-2080-ti", help="A built-in device name or a profile JSON."),
    rate: float = typer.Option(400.0, help="r: segment requests per second."),
    pattern: str = typer.Option("poisson", help="Arrival process: poisson or bursty."),
    duration_s: float = typer.Option(10.0, "--duration-s", help="Seconds of arrivals."),
    seed: int = typer.Option(0, help="Seed of the workload."),
    max_batch: int = typer.Option(16, help="B_max: most requests in one batch."),
    vram_cap_gib: float | None = typer.Option(None, help="M_max in GiB (default: the device)."),
    util_block_pct: float = typer.Option(95.0, help="U_blk: no loads at this utilisation (%)."),
    idle_unload_s: float = typer.Option(2.0, help="t_idle: offload instances idle this long."),
    queue_threshold: int = typer.Option(32, help="Q_th: queue length that triggers scale-up."),
    scale_max_new: int = typer.Option(2, help="N_new: most instances loaded per scale-up."),
    widths: str = typer.Option("0.25,0.5,0.75,1.0", help="W: comma-separated widths."),
    out: Path = typer.Option(Path("runs/slim-server"), help="Folder for the JSON and metrics."),
) -> None:
    """Runs one server (greedy executor) under a seeded workload; prints and saves its metrics."""
    if pattern not in get_args(Pattern):
        raise ConfigError(f"--pattern: expected poisson or bursty, got {pattern!r}")
    if duration_s <= 0:
        raise ConfigError(f"--duration-s: expected a positive number of seconds, got {duration_s}")
    knobs = {
        "arrival_rate_per_s": rate,
        "max_batch": max_batch,
        "vram_cap_bytes": None if vram_cap_gib is None else int(vram_cap_gib * 1024**3),
        "util_block_pct": util_block_pct,
        "idle_unload_s": idle_unload_s,
        "scale_queue_threshold": queue_threshold,
        "scale_max_new": scale_max_new,
        "widths": _comma_list("--widths", widths, float),
    }
    config = validate_config(knobs, ExecutorConfig, "command line")
    report, executor = run_server(
        device, config, pattern=cast(Pattern, pattern), duration_s=duration_s, seed=seed, sim=sim
    )
    console = Console()
    console.print(report_table(report))
    json_path, metrics_path = save_run(out, config, report, executor)
    console.print(f"results: {json_path}; Prometheus metrics: {metrics_path}")


register_serving(app)
