"""SlimResNet speed: training throughput and per-segment inference latency per width and batch.

Run: ``.venv/bin/python benchmarks/bench_model.py [--device cpu|cuda] [--threads 2] [--out F.json]``

1. Training throughput (images/s) of one universally slimmable step (widest + narrowest + 2
   random width tuples, in-place distillation, AdamW), and of a widest-only step for reference,
   on random 3x32x32 images with 100 classes (the CIFAR-100 shape).
2. Inference latency (median ms) of each standalone segment (``extract_segment``: what a server
   loads) at every width and several batch sizes, with the previous width equal to the width
   (a uniform path), and the FLOP/s it achieves from the analytic cost table.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import (
    NUM_SEGMENTS,
    STAGE_CHANNELS,
    WIDTHS,
    SlimResNet,
    extract_segment,
)
from hetsched.slim.model.train import TrainConfig, resolve_device, sandwich_step

NUM_CLASSES = 100
IMAGE_SIZE = 32


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def training_throughput(device: torch.device, batch_size: int, steps: int, sandwich: bool) -> float:
    """Images per second of training steps (after one warm-up step)."""
    torch.manual_seed(0)
    model = SlimResNet(NUM_CLASSES).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), 2e-3)
    x = torch.randn(batch_size, 3, IMAGE_SIZE, IMAGE_SIZE, device=device)
    y = torch.randint(0, NUM_CLASSES, (batch_size,), device=device)
    config = TrainConfig(random_tuples=2)
    rng = random.Random(0)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        if sandwich:
            sandwich_step(model, x, y, rng, config)
        else:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    step()
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return batch_size * steps / (time.perf_counter() - start)


def segment_latency_ms(
    model: SlimResNet, device: torch.device, segment: int, width: float, batch: int, repeats: int
) -> float:
    """Median latency of one forward of the standalone segment on a batch."""
    module = extract_segment(model, segment, width)
    if segment == 0:
        shape = (batch, 3, IMAGE_SIZE, IMAGE_SIZE)
    else:
        size = IMAGE_SIZE // 2 ** (segment - 1)
        shape = (batch, channel_count(STAGE_CHANNELS[segment - 1], width), size, size)
    x = torch.randn(shape, device=device)
    times = []
    with torch.inference_mode():
        module(x)
        for _ in range(repeats):
            _sync(device)
            start = time.perf_counter()
            module(x)
            _sync(device)
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--train-batches", default="32,64", help="training batch sizes")
    parser.add_argument("--train-steps", type=int, default=3, help="timed training steps")
    parser.add_argument("--batches", default="1,8,32", help="inference batch sizes")
    parser.add_argument("--repeats", type=int, default=10, help="timed forwards per cell")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    console = Console()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    console.print(
        f"machine: {name or platform.machine()}, {args.threads} CPU threads, torch"
        f" {torch.__version__}, device {device}"
    )
    results: dict = {"device": str(device), "machine": name, "threads": args.threads}

    train = Table(title="Training throughput (images/s, 3x32x32, 100 classes)")
    for column in ("batch", "sandwich step (4 passes)", "widest only (1 pass)"):
        train.add_column(column, justify="right")
    results["training_images_per_s"] = {}
    for batch in (int(b) for b in args.train_batches.split(",")):
        sandwich = training_throughput(device, batch, args.train_steps, sandwich=True)
        widest = training_throughput(device, batch, args.train_steps, sandwich=False)
        results["training_images_per_s"][batch] = {"sandwich": sandwich, "widest": widest}
        train.add_row(str(batch), f"{sandwich:.1f}", f"{widest:.1f}")
    console.print(train)

    torch.manual_seed(0)
    model = SlimResNet(NUM_CLASSES).to(device).eval()
    costs = compute_cost_table(NUM_CLASSES, IMAGE_SIZE)
    batches = [int(b) for b in args.batches.split(",")]
    latency = Table(title="Per-segment inference latency, median ms (GFLOP/s achieved)")
    latency.add_column("segment")
    latency.add_column("width", justify="right")
    latency.add_column("GFLOP/image", justify="right")
    for batch in batches:
        latency.add_column(f"batch {batch}", justify="right")
    results["segment_latency_ms"] = []
    for segment in range(NUM_SEGMENTS):
        for width in WIDTHS:
            prev = 1.0 if segment == 0 else width
            gflop = costs.get(segment, width, prev).flops_per_image / 1e9
            cells = []
            for batch in batches:
                ms = segment_latency_ms(model, device, segment, width, batch, args.repeats)
                results["segment_latency_ms"].append(
                    {"segment": segment, "width": width, "batch": batch, "latency_ms": ms}
                )
                cells.append(f"{ms:.2f} ({gflop * batch / (ms / 1e3):.0f})")
            latency.add_row(str(segment + 1), f"{width:g}", f"{gflop:.3f}", *cells)
    console.print(latency)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
        console.print(f"written: {args.out}")


if __name__ == "__main__":
    main()
