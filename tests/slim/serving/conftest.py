"""Fixtures of the serving tests: torch on one thread, one small trained digits model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.checkpoint import load_checkpoint
from hetsched.slim.model.data import load_digits
from hetsched.slim.model.train import CHECKPOINT_NAME, TrainConfig, train_slimresnet

CACHE_NAME = f"hetsched-serving-digits8-epoch1-torch{torch.__version__}"


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def digits_checkpoint(request: pytest.FixtureRequest, tmp_path_factory) -> Path:
    """SlimResNet after one epoch on the 8x8 digits: about 2/3 right at full width, far above
    chance (1/10).

    Training takes a minute on two busy cores, so the checkpoint is kept in pytest's cache
    (``.pytest_cache``) when the cache is on; a run without it trains into a temporary folder.
    """
    cache = getattr(request.config, "cache", None)
    out = cache.mkdir(CACHE_NAME) if cache else tmp_path_factory.mktemp("digits-model")
    checkpoint = out / CHECKPOINT_NAME
    if checkpoint.is_file():
        try:
            load_checkpoint(checkpoint)
            return checkpoint
        except DataError:
            pass  # a half-written or foreign file: train again
    train_slimresnet(load_digits(8), TrainConfig(epochs=1, batch_size=32, random_tuples=0), out)
    return checkpoint
