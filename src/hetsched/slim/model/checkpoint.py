"""SlimResNet checkpoints: weights, architecture arguments and (optionally) the training state.

A checkpoint is one dict of tensors and plain values, written atomically and read back with
``torch.load(weights_only=True)``, so opening a checkpoint never runs code from the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.slimresnet import SlimResNet

CHECKPOINT_FORMAT = "hetsched-slimresnet-1"


def save_checkpoint(
    path: Path,
    model: SlimResNet,
    *,
    epoch: int,
    config: dict[str, Any],
    optimizer_state: dict | None = None,
    scheduler_state: dict | None = None,
    history: list[dict[str, float]] | None = None,
) -> None:
    """Writes ``model`` and the training state after ``epoch`` (1-based count of epochs done).

    Args:
        config: Plain values describing the run (training config, data spec, normalisation);
            stored as is and checked on resume.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "architecture": {
            "num_classes": model.num_classes,
            "in_channels": model.in_channels,
            "widths": list(model.widths),
        },
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "epoch": epoch,
        "config": config,
        "optimizer": optimizer_state,
        "scheduler": scheduler_state,
        "history": history or [],
    }
    partial = path.with_suffix(path.suffix + ".partial")
    torch.save(payload, partial)
    os.replace(partial, path)  # a crash mid-write never leaves a truncated checkpoint


def load_checkpoint(path: Path, device: str = "cpu") -> dict[str, Any]:
    """The raw checkpoint dict (tensors on ``device``).

    Raises:
        DataError: If the file is missing, unreadable, or not a SlimResNet checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("checkpoint not found", path=str(path))
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise DataError(f"not a readable checkpoint: {error}", path=str(path)) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise DataError(f"not a {CHECKPOINT_FORMAT} checkpoint", path=str(path))
    return payload


def model_from_checkpoint(payload: dict[str, Any], path: Path | str = "") -> SlimResNet:
    """Builds the SlimResNet a loaded checkpoint describes and loads its weights."""
    arch = payload["architecture"]
    model = SlimResNet(int(arch["num_classes"]), int(arch["in_channels"]), tuple(arch["widths"]))
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as error:
        raise DataError(f"weights do not fit the architecture: {error}", path=str(path)) from None
    return model


def load_model(path: Path, device: str = "cpu") -> SlimResNet:
    """The trained SlimResNet in ``path``, on ``device``, in eval mode."""
    model = model_from_checkpoint(load_checkpoint(path, device), path)
    return model.to(device).eval()
