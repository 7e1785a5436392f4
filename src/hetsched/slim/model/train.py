"""Universally slimmable training of SlimResNet (sandwich rule + in-place distillation).

Each step follows Yu & Huang's universally slimmable recipe (the paper's refs. [1], [2]), with
random widths drawn per segment because our segments run at independent widths:

1. the widest network (all segments at 1.0) learns from the labels (cross-entropy);
2. its softened predictions, detached, become the targets of
3. the narrowest network (all 0.25) and ``random_tuples`` random per-segment width tuples
   (in-place distillation: soft-target cross-entropy);

gradients of all passes accumulate before one optimiser step. The learning rate follows a cosine
schedule over all steps (paper section IV.1). A checkpoint is written after every epoch, and
``resume=True`` continues from it with the same batches and width draws an uninterrupted run
would have used.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from hetsched.core.config import StrictModel
from hetsched.core.errors import ConfigError
from hetsched.core.seeding import seed_everything
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from hetsched.slim.model.data import ImageDataset, augment_batch
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, SlimResNet

CHECKPOINT_NAME = "checkpoint.pt"


class TrainConfig(StrictModel, use_attribute_docstrings=True):
    """Hyper-parameters of one training run."""

    epochs: int = Field(5, ge=1)
    """Passes over the training split."""
    batch_size: int = Field(32, ge=1)
    """Images per step."""
    optimizer: Literal["sgd", "adamw"] = "adamw"
    """AdamW, or SGD with Nesterov momentum (e.g. lr 0.1, weight decay 5e-4 for CIFAR-100)."""
    lr: float = Field(2e-3, gt=0)
    """Peak learning rate (start of the cosine schedule)."""
    weight_decay: float = Field(0.05, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    """SGD momentum (ignored by AdamW)."""
    random_tuples: int = Field(2, ge=0)
    """Random per-segment width tuples per step, besides the widest and the narrowest."""
    seed: int = 0


@dataclass(frozen=True)
class EpochStats:
    """What one epoch did: mean losses, and test top-1 of the widest and narrowest networks."""

    epoch: int
    loss: float
    distill_loss: float
    test_top1_widest: float
    test_top1_narrowest: float
    seconds: float


def resolve_device(device: str) -> torch.device:
    """``cpu`` or ``cuda`` (``cuda:N``); asking for CUDA where there is none is a user error."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine")
    if device != "cpu" and not device.startswith("cuda"):
        raise ConfigError(f"--device {device}: expected cpu or cuda")
    return torch.device(device)


@torch.no_grad()
def evaluate_top1(
    model: SlimResNet,
    images: torch.Tensor,
    labels: torch.Tensor,
    widths: tuple[float, ...],
    batch_size: int = 256,
) -> float:
    """Top-1 accuracy (fraction) of ``model`` at ``widths`` on a split."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(labels), batch_size):
        x = images[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        correct += int((model(x, widths).argmax(1) == y).sum())
    model.train(was_training)
    return correct / max(1, len(labels))


def _soft_cross_entropy(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    return -(target_probs * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def sandwich_step(
    model: SlimResNet, x: torch.Tensor, y: torch.Tensor, rng: random.Random, config: TrainConfig
) -> tuple[float, float]:
    """One step's forward/backward passes (gradients accumulate); returns (CE, distill) losses."""
    widest, narrowest = max(model.widths), min(model.widths)
    logits = model(x, (widest,) * NUM_SEGMENTS)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    teacher = F.softmax(logits.detach(), dim=1)
    students = [(narrowest,) * NUM_SEGMENTS] + [
        tuple(rng.choice(model.widths) for _ in range(NUM_SEGMENTS))
        for _ in range(config.random_tuples)
    ]
    distill = 0.0
    for widths in students:
        student_loss = _soft_cross_entropy(model(x, widths), teacher)
        student_loss.backward()
        distill += float(student_loss.detach()) / len(students)
    return float(loss.detach()), distill


def _optimizer(model: SlimResNet, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(
        model.parameters(),
        config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        nesterov=True,
    )


def train_slimresnet(
    dataset: ImageDataset,
    config: TrainConfig,
    out_dir: Path,
    *,
    device: str = "cpu",
    resume: bool = False,
    on_step: Callable[[int, int], None] | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
) -> tuple[SlimResNet, list[EpochStats]]:
    """Trains SlimResNet on ``dataset``, writing ``out_dir/checkpoint.pt`` after every epoch.

    Args:
        on_step: Called with (steps done this epoch, steps per epoch), e.g. to move a progress bar.
        on_epoch: Called with each finished epoch's statistics.

    Raises:
        ConfigError: If ``resume`` finds a checkpoint of a different run (config or data).
        DataError: If ``resume`` finds no readable checkpoint.
    """
    torch_device = resolve_device(device)
    run_config = {
        "train": config.model_dump(),
        "data": dataset.name,
        "train_images": len(dataset.train_labels),
    }
    checkpoint_path = Path(out_dir) / CHECKPOINT_NAME
    payload = load_checkpoint(checkpoint_path, str(torch_device)) if resume else None
    if payload is not None and payload["config"] != run_config:
        raise ConfigError(
            f"{checkpoint_path}: --resume needs the same run; checkpoint has"
            f" {payload['config']}, this run {run_config}"
        )
    seed_everything(config.seed)  # the initial weights depend on the seed
    if payload is None:
        model = SlimResNet(dataset.num_classes)
    else:
        model = model_from_checkpoint(payload, checkpoint_path)
    model = model.to(torch_device)
    optimizer = _optimizer(model, config)
    steps_per_epoch = -(-len(dataset.train_labels) // config.batch_size)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=config.epochs * steps_per_epoch
    )
    history: list[EpochStats] = []
    start_epoch = 0
    if payload is not None:
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        history = [EpochStats(**h) for h in payload["history"]]
        start_epoch = int(payload["epoch"])

    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        # Per-epoch seeds make a resumed run draw the batches and widths an unbroken one would.
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
        rng = random.Random(config.seed * 1_000_003 + epoch)
        order = torch.randperm(len(dataset.train_labels), generator=generator)
        model.train()
        losses, distills = [], []
        for step in range(steps_per_epoch):
            batch = order[step * config.batch_size : (step + 1) * config.batch_size]
            x = dataset.train_images[batch]
            if dataset.augment:
                x = augment_batch(x, generator)
            x, y = x.to(torch_device), dataset.train_labels[batch].to(torch_device)
            optimizer.zero_grad(set_to_none=True)
            loss, distill = sandwich_step(model, x, y, rng, config)
            optimizer.step()
            scheduler.step()
            losses.append(loss)
            distills.append(distill)
            if on_step:
                on_step(step + 1, steps_per_epoch)
        stats = EpochStats(
            epoch=epoch + 1,
            loss=sum(losses) / len(losses),
            distill_loss=sum(distills) / len(distills),
            test_top1_widest=evaluate_top1(
                model, dataset.test_images, dataset.test_labels, (1.0,) * NUM_SEGMENTS
            ),
            test_top1_narrowest=evaluate_top1(
                model, dataset.test_images, dataset.test_labels, (min(model.widths),) * NUM_SEGMENTS
            ),
            seconds=time.perf_counter() - started,
        )
        history.append(stats)
        save_checkpoint(
            checkpoint_path,
            model,
            epoch=epoch + 1,
            config=run_config,
            optimizer_state=optimizer.state_dict(),
            scheduler_state=scheduler.state_dict(),
            history=[asdict(h) for h in history],
        )
        if on_epoch:
            on_epoch(stats)
    return model.eval(), history
