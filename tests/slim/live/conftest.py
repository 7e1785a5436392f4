"""Fixtures of the live-backend tests: torch on one thread, one tiny digits model per session."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hetsched.slim.model.checkpoint import load_model
from hetsched.slim.model.data import load_digits
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.model.train import CHECKPOINT_NAME, TrainConfig, train_slimresnet

IMAGE_SIZE = 16


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def digits_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SlimResNet trained for one short epoch on 128 digits at 16x16 (a few seconds)."""
    out = tmp_path_factory.mktemp("digits-model")
    dataset = load_digits(IMAGE_SIZE).limited(128)
    train_slimresnet(dataset, TrainConfig(epochs=1, batch_size=32, random_tuples=1), out)
    return out / CHECKPOINT_NAME


@pytest.fixture(scope="session")
def digits_model(digits_checkpoint: Path) -> SlimResNet:
    return load_model(digits_checkpoint)


@pytest.fixture(scope="session")
def digits_images() -> torch.Tensor:
    """Sixteen test images (3 x 16 x 16 each)."""
    return load_digits(IMAGE_SIZE).test_images[:16]
