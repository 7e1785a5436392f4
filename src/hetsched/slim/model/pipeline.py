"""The model's user-facing steps, shared by the CLI and the demo: train, measure, print.

Each step shows a rich progress bar, prints what it found, and leaves its artefacts in one
folder: ``checkpoint.pt``, ``cost_table.json``, ``training_history.json`` and
``accuracy_table.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hetsched.slim.model.accuracy import PAPER_TABLE_I, PAPER_TABLE_II, AccuracyTable
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.model.data import ImageDataset, load_dataset
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.model.train import EpochStats, TrainConfig, resolve_device, train_slimresnet

COST_TABLE_NAME = "cost_table.json"
HISTORY_NAME = "training_history.json"
ACCURACY_TABLE_NAME = "accuracy_table.json"


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def train_with_progress(
    dataset: ImageDataset,
    config: TrainConfig,
    out_dir: Path,
    *,
    device: str = "cpu",
    resume: bool = False,
    console: Console | None = None,
) -> tuple[SlimResNet, list[EpochStats]]:
    """Trains with a progress bar and a line per epoch; writes checkpoint, costs, history."""
    console = console or Console()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    console.print(
        f"training SlimResNet on {dataset.name}: {len(dataset.train_labels)} train /"
        f" {len(dataset.test_labels)} test images, {dataset.num_classes} classes, {config.epochs}"
        f" epochs, {config.optimizer} lr {config.lr}, device {device}"
    )
    with _progress(console) as progress:
        task = progress.add_task("epoch", total=None)

        def on_step(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        def on_epoch(stats: EpochStats) -> None:
            progress.update(task, completed=0, description=f"epoch {stats.epoch + 1}")
            console.print(
                f"epoch {stats.epoch}/{config.epochs}: loss {stats.loss:.4f}, distillation loss"
                f" {stats.distill_loss:.4f}, test top-1 {100 * stats.test_top1_widest:.2f} %"
                f" (widest) / {100 * stats.test_top1_narrowest:.2f} % (narrowest),"
                f" {stats.seconds:.1f} s"
            )

        progress.update(task, description="epoch 1")
        model, history = train_slimresnet(
            dataset,
            config,
            out_dir,
            device=device,
            resume=resume,
            on_step=on_step,
            on_epoch=on_epoch,
        )
    image_size = int(dataset.train_images.shape[-1])
    compute_cost_table(dataset.num_classes, image_size).to_json(out_dir / COST_TABLE_NAME)
    (out_dir / HISTORY_NAME).write_text(json.dumps([asdict(h) for h in history], indent=1))
    console.print(f"checkpoint and cost table in {out_dir}")
    return model, history


def measure_checkpoint(
    checkpoint: Path,
    out_dir: Path,
    *,
    data: str | None = None,
    device: str = "cpu",
    batch_size: int = 128,
    limit_images: int | None = None,
    console: Console | None = None,
) -> AccuracyTable:
    """Measures the trained model in ``checkpoint`` on ``data``'s test split (default: the data
    set it was trained on); writes ``accuracy_table.json`` (see :func:`measure_with_progress`)."""
    torch_device = resolve_device(device)
    payload = load_checkpoint(checkpoint, str(torch_device))
    model = model_from_checkpoint(payload, checkpoint).to(torch_device).eval()
    dataset = load_dataset(data or payload["config"]["data"]).limited(limit_images)
    return measure_with_progress(
        model, dataset, out_dir, batch_size=batch_size, source=dataset.name, console=console
    )


def measure_with_progress(
    model: SlimResNet,
    dataset: ImageDataset,
    out_dir: Path,
    *,
    batch_size: int = 128,
    source: str = "",
    console: Console | None = None,
) -> AccuracyTable:
    """Measures all width tuples on the test split; writes ``accuracy_table.json``."""
    console = console or Console()
    with _progress(console) as progress:
        task = progress.add_task(
            f"{len(model.widths) ** 4} width tuples", total=len(dataset.test_labels)
        )
        table = AccuracyTable.measure(
            model,
            dataset.test_images,
            dataset.test_labels,
            batch_size,
            source=source or dataset.name,
            on_batch=lambda n: progress.advance(task, n),
        )
    path = Path(out_dir) / ACCURACY_TABLE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_json(path)
    console.print(f"accuracy table ({len(table.tuples())} tuples): {path}")
    return table


def _tuple_label(widths: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{w:g}" for w in widths) + ")"


def paper_tables(table: AccuracyTable) -> list[Table]:
    """Table I (uniform widths) and Table II (the paper's mixed tuples), measured beside paper."""
    tables = []
    for title, paper in (
        ("Table I: top-1 at uniform widths (w1=w2=w3=w4)", PAPER_TABLE_I),
        ("Table II: top-1 at the paper's mixed widths", PAPER_TABLE_II),
    ):
        rich_table = Table(title=title, caption=f"measured on {table.source}; paper on CIFAR-100")
        rich_table.add_column("widths", no_wrap=True)
        rich_table.add_column("measured top-1 %", justify="right")
        rich_table.add_column("paper top-1 %", justify="right")
        for widths, paper_top1 in paper.items():
            rich_table.add_row(
                _tuple_label(widths), f"{100 * table.top1(widths):.2f}", f"{100 * paper_top1:.2f}"
            )
        tables.append(rich_table)
    return tables
