"""Training: the sandwich recipe lowers the loss; resume continues an interrupted run exactly."""

from __future__ import annotations

import pytest
import torch

from hetsched.core.errors import ConfigError
from hetsched.slim.model.checkpoint import load_checkpoint
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.train import TrainConfig, train_slimresnet

TINY = TrainConfig(epochs=3, batch_size=16, random_tuples=1, lr=2e-3)


@pytest.fixture(scope="module")
def tiny_digits():
    return load_dataset("digits:8").limited(48)


def test_training_lowers_the_loss(tiny_digits, tmp_path) -> None:
    config = TINY.model_copy(update={"epochs": 8})
    _, history = train_slimresnet(tiny_digits.limited(32), config, tmp_path)
    assert [h.epoch for h in history] == list(range(1, 9))
    assert history[-1].loss < 0.7 * history[0].loss


def test_resume_equals_an_uninterrupted_run(tiny_digits, tmp_path) -> None:
    config = TINY.model_copy(update={"epochs": 2})
    straight, _ = train_slimresnet(tiny_digits, config, tmp_path / "straight")
    first = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")
    assert first["epoch"] == 2

    class SimulatedCrashError(Exception):
        pass

    def crash(_stats) -> None:
        raise SimulatedCrashError

    with pytest.raises(SimulatedCrashError):  # killed after its first epoch's checkpoint
        train_slimresnet(tiny_digits, config, tmp_path / "cut", on_epoch=crash)
    assert load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["epoch"] == 1
    resumed, history = train_slimresnet(tiny_digits, config, tmp_path / "cut", resume=True)
    assert [h.epoch for h in history] == [1, 2]
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_resume_refuses_a_different_run(tiny_digits, tmp_path) -> None:
    train_slimresnet(tiny_digits, TINY.model_copy(update={"epochs": 1}), tmp_path)
    other = TINY.model_copy(update={"epochs": 1, "lr": 0.1})
    with pytest.raises(ConfigError, match="same run"):
        train_slimresnet(tiny_digits, other, tmp_path, resume=True)


def test_cuda_where_there_is_none_is_a_config_error(tiny_digits, tmp_path) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here; the error path needs a machine without it")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        train_slimresnet(tiny_digits, TINY, tmp_path, device="cuda")
