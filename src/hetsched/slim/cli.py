"""`hetsched slim` sub-commands."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True)


# -- router and experiment (issue 4) ---------------------------------------------------------------


def _scenario(
    config: Path | None,
    images: int | None,
    accuracy_table: str | None,
    rate_per_s: float | None = None,
):
    """The paper's 3-GPU scenario, optionally from a YAML file, with command-line overrides."""
    from hetsched.core.config import load_config
    from hetsched.core.errors import ConfigError
    from hetsched.slim.scenario import ScenarioConfig

    if rate_per_s is not None and rate_per_s <= 0:
        raise ConfigError(f"--rate: expected a positive rate in images/s, got {rate_per_s:g}")
    scenario = load_config(config, ScenarioConfig) if config else ScenarioConfig()
    updates = {"num_images": images, "accuracy_table": accuracy_table, "rate_per_s": rate_per_s}
    return scenario.model_copy(update={k: v for k, v in updates.items() if v is not None})


def _seeds(seeds: str) -> list[int]:
    from hetsched.core.errors import ConfigError

    try:
        return [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds: expected comma-separated integers, got {seeds!r}") from None


def _live(scenario, live: bool, checkpoint: Path | None, devices: str | None, accuracy: str | None):
    """The scenario and the live setup of ``--live`` (None without it), checked before any work.

    Live, a measured ``accuracy_table.json`` beside the checkpoint is the default prior (for
    training too, so the router learns the model it will run).
    """
    from hetsched.core.errors import ConfigError
    from hetsched.slim.live_cluster import LiveSetup, measured_table_beside

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
    setup = LiveSetup.open(checkpoint, len(scenario.servers), scenario.widths, names)
    beside = measured_table_beside(checkpoint)
    if accuracy is None and scenario.accuracy_table == "paper" and beside is not None:
        scenario = scenario.model_copy(update={"accuracy_table": str(beside)})
    return scenario, setup


_SCENARIO_OPT = typer.Option(None, "--scenario", help="Scenario YAML (default: the paper's).")
_IMAGES_OPT = typer.Option(None, "--images", help="Images per workload (episode).")
_ACCURACY_OPT = typer.Option(
    None, "--accuracy-table", help="'paper' (Tables I/II) or a measured accuracy-table JSON."
)
_RATE_OPT = typer.Option(
    None, "--rate", help="Mean arrival rate in images/s (live: what the devices can serve)."
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


@app.command("train-router")
def train_router_command(
    preset: str = typer.Option("efficiency", help="Reward preset: efficiency or balanced."),
    reward: Path | None = typer.Option(None, help="YAML with reward weights (overrides preset)."),
    steps: int = typer.Option(30_000, help="Training decisions (PPO total timesteps)."),
    rollout: int = typer.Option(1024, help="Decisions per PPO update."),
    seed: int = typer.Option(0),
    out: Path = typer.Option(Path("runs/router"), help="Folder for checkpoint and curves."),
    scenario_file: Path | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
) -> None:
    """Trains a PPO router in the simulated cluster; writes a checkpoint and training curves."""
    import torch
    from rich.console import Console

    from hetsched.core.config import load_config
    from hetsched.slim.experiment import training_clusters
    from hetsched.slim.reward import RewardWeights, reward_weights
    from hetsched.slim.router_training import ppo_budget, train_router
    from hetsched.slim.scenario import encoder_for, mean_top1

    torch.set_num_threads(1)
    scenario = _scenario(scenario_file, images, accuracy_table)
    weights = load_config(reward, RewardWeights) if reward else reward_weights(preset)
    ppo = ppo_budget(steps, rollout, seed)
    trained = train_router(
        training_clusters(scenario, seed),
        encoder_for(scenario),
        weights,
        ppo,
        mean_top1=mean_top1(scenario),
        out_dir=out,
        name=f"ppo-{preset if reward is None else reward.stem}",
        metadata={"preset": preset, "scenario": scenario.model_dump()},
        progress=True,
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
    scenario_file: Path | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
    rate: float | None = _RATE_OPT,
) -> None:
    """Evaluates routers on seeded workloads and prints Table III-V style tables."""
    import json

    import torch

    from hetsched.slim.experiment import evaluate_router
    from hetsched.slim.report import aggregate, paper_table, results_console
    from hetsched.slim.routers import ROUTERS

    torch.set_num_threads(1)
    scenario = _scenario(scenario_file, images, accuracy_table, rate)
    seed_list = _seeds(seeds)
    scenario, setup = _live(scenario, live, checkpoint, live_devices, accuracy_table)
    console = results_console()
    if setup is not None:
        console.print(setup.describe())
    results = {}
    for name in routers:
        path = Path(name)
        runs = []
        for seed in seed_list:
            if path.suffix == ".pt" or path.is_file():
                router = ROUTERS.create("ppo", checkpoint=path, seed=seed)
            else:
                router = ROUTERS.create(name, seed=seed)
            runs.append(evaluate_router(scenario, router, seed, live=setup))
        label = path.stem if path.suffix == ".pt" else name
        results[label] = aggregate(runs)
        console.print(paper_table(label, results[label], results.get("random"), len(seed_list)))
    if setup is not None:
        console.print(setup.energy_note())
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    console.print(f"results: {out / 'results.json'}")


@app.command("experiment")
def experiment_command(
    seeds: str = typer.Option("0,1,2", help="Comma-separated seeds (train and evaluate per seed)."),
    steps: int = typer.Option(30_000, help="Training decisions per PPO router."),
    baselines: str = typer.Option(
        "random", help="Comma-separated baseline routers (random first: the Δ columns use it)."
    ),
    out: Path = typer.Option(Path("runs/slim-experiment"), help="Folder for JSON and plots."),
    live: bool = typer.Option(False, help="Evaluate on the live backend (devices found here)."),
    checkpoint: Path | None = _CHECKPOINT_OPT,
    live_devices: str | None = _LIVE_DEVICES_OPT,
    scenario_file: Path | None = _SCENARIO_OPT,
    images: int | None = _IMAGES_OPT,
    accuracy_table: str | None = _ACCURACY_OPT,
    rate: float | None = _RATE_OPT,
) -> None:
    """The paper's experiment: random vs PPO-efficiency vs PPO-balanced, Tables III-V."""
    import torch

    from hetsched.slim.experiment import run_experiment
    from hetsched.slim.router_training import ppo_budget

    torch.set_num_threads(1)
    scenario = _scenario(scenario_file, images, accuracy_table, rate)
    ppo = ppo_budget(steps)
    from hetsched.slim.routers import ROUTERS

    names = tuple(name.strip() for name in baselines.split(",") if name.strip())
    for name in names:
        ROUTERS.get(name)  # an unknown name fails here, before any training
    seed_list = _seeds(seeds)
    scenario, setup = _live(scenario, live, checkpoint, live_devices, accuracy_table)
    run_experiment(scenario, seed_list, out, ppo=ppo, baselines=names, live=setup)


# -- model: training and accuracy table (issue 2) --------------------------------------------------


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
    from hetsched.core.config import validate_config
    from hetsched.slim.data import load_dataset
    from hetsched.slim.pipeline import train_with_progress
    from hetsched.slim.train import TrainConfig

    config = validate_config(
        {
            "epochs": epochs,
            "batch_size": batch_size,
            "optimizer": optimizer,
            "lr": lr,
            "weight_decay": weight_decay,
            "random_tuples": random_tuples,
            "seed": seed,
        },
        TrainConfig,
        "command line",
    )
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
    from rich.console import Console

    from hetsched.slim.checkpoint import load_checkpoint, model_from_checkpoint
    from hetsched.slim.data import load_dataset
    from hetsched.slim.pipeline import measure_with_progress, paper_tables
    from hetsched.slim.train import resolve_device

    torch_device = resolve_device(device)
    payload = load_checkpoint(checkpoint, str(torch_device))
    model = model_from_checkpoint(payload, checkpoint).to(torch_device).eval()
    dataset = load_dataset(data or payload["config"]["data"]).limited(limit)
    console = Console()
    table = measure_with_progress(
        model, dataset, out, batch_size=batch_size, source=dataset.name, console=console
    )
    for rich_table in paper_tables(table):
        console.print(rich_table)


# -- executor: device profile (issue 3, live backend) ----------------------------------------------


def _numbers(option: str, text: str, kind: type) -> list:
    from hetsched.core.errors import ConfigError

    try:
        return [kind(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"{option}: expected comma-separated numbers, got {text!r}") from None


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
    import torch
    from rich.console import Console
    from rich.table import Table

    from hetsched.slim.checkpoint import load_model
    from hetsched.slim.model import SlimResNet
    from hetsched.slim.profile import run_profile

    if threads is not None:
        torch.set_num_threads(threads)
    if checkpoint is not None:
        model = load_model(checkpoint)
    else:
        torch.manual_seed(0)
        model = SlimResNet(num_classes=10)
    console = Console()
    console.print(f"profiling {device} ({torch.get_num_threads()} torch threads)")

    def on_cell(cell) -> None:
        if cell.batch_size == max(sizes):
            console.print(
                f"  segment {cell.segment + 1} width {cell.width:g}: batch {cell.batch_size}"
                f" {1e3 * cell.latency_s:.2f} ms, {cell.flops / cell.latency_s / 1e9:.0f} GFLOP/s"
            )

    sizes = _numbers("--batch-sizes", batch_sizes, int)
    result = run_profile(
        model,
        device,
        sizes,
        _numbers("--widths", widths, float),
        out,
        name=name,
        image_size=image_size,
        min_time_s=min_time,
        passes=passes,
        on_cell=on_cell,
    )
    fit, spec = result.fit, result.spec
    table = Table(title=f"profile {spec.name}: fitted device model")
    table.add_column("field")
    table.add_column("value", justify="right")
    for field, value in (
        ("launch overhead", f"{1e3 * fit.launch_overhead_s:.3f} ms"),
        ("achieved throughput", f"{fit.achieved_flops_per_s / 1e9:.0f} GFLOP/s"),
        (
            "achieved fraction of peak",
            f"{fit.achieved_fraction:.3f} of {fit.peak_tflops:g} TFLOP/s",
        ),
        ("median |relative error| of the fit", f"{100 * fit.median_relative_error:.1f} %"),
        (
            "knee utilisation",
            "not measurable" if fit.knee_utilization is None else f"{fit.knee_utilization:.2f}",
        ),
    ):
        table.add_row(field, value)
    console.print(table)
    console.print(f"energy: {result.energy_explanation}")
    console.print(f"profile: {result.json_path}")
    console.print(f"plots: {', '.join(str(p) for p in result.plot_paths)}")


# -- executor: one server under a generated workload (issue 3) -------------------------------------


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
    import json

    from prometheus_client import CollectorRegistry, generate_latest
    from rich.console import Console

    from hetsched.core.config import validate_config
    from hetsched.core.errors import ConfigError
    from hetsched.slim.executor import ExecutorConfig
    from hetsched.slim.run_server import report_table, run_server
    from hetsched.slim.telemetry import register_metrics

    if pattern not in ("poisson", "bursty"):
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
        "widths": _numbers("--widths", widths, float),
    }
    config = validate_config(knobs, ExecutorConfig, "command line")
    report, executor = run_server(
        device, config, pattern=pattern, duration_s=duration_s, seed=seed, sim=sim
    )
    console = Console()
    console.print(report_table(report))
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "config": config.model_dump(),
        "report": report.as_dict(),
        "series": executor.record.series.as_dict(),
    }
    (out / "run-server.json").write_text(json.dumps(result, indent=1))
    registry = CollectorRegistry()
    register_metrics(registry, [executor])
    (out / "metrics.prom").write_bytes(generate_latest(registry))
    console.print(f"results: {out / 'run-server.json'}; Prometheus metrics: {out / 'metrics.prom'}")


from hetsched.slim.serving.cli import register as register_serving  # noqa: E402

register_serving(app)
