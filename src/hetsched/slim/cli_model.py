"""``hetsched slim`` model and executor commands: train, accuracy, profile, run-server."""

from __future__ import annotations

from pathlib import Path
from typing import cast, get_args

import torch
import typer
from rich.console import Console

from hetsched.core.config import validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.cli_options import comma_list
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.experiments.run_server import report_table, run_server, save_run
from hetsched.slim.live.profile import model_to_profile, run_profile
from hetsched.slim.live.profile_cells import describe_cell
from hetsched.slim.live.profile_fit import fit_table
from hetsched.slim.live.profile_plots import plot_profile
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.pipeline import measure_checkpoint, paper_tables, train_with_progress
from hetsched.slim.model.train import TrainConfig
from hetsched.slim.sim.workload import Pattern


def register(app: typer.Typer) -> None:
    """Adds the model and executor commands to the ``hetsched slim`` app (in ``--help`` order)."""
    app.command("train")(train_command)
    app.command("accuracy")(accuracy_command)
    app.command("profile")(profile_command)
    app.command("run-server")(run_server_command)


# -- model: training and accuracy table ------------------------------------------------------------


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
    sizes = comma_list("--batch-sizes", batch_sizes, int)
    result = run_profile(
        model,
        device,
        sizes,
        comma_list("--widths", widths, float),
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
        "widths": comma_list("--widths", widths, float),
    }
    config = validate_config(knobs, ExecutorConfig, "command line")
    report, executor = run_server(
        device, config, pattern=cast(Pattern, pattern), duration_s=duration_s, seed=seed, sim=sim
    )
    console = Console()
    console.print(report_table(report))
    json_path, metrics_path = save_run(out, config, report, executor)
    console.print(f"results: {json_path}; Prometheus metrics: {metrics_path}")
