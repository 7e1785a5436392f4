"""Fixtures of the SlimResNet tests: one small seeded model, torch kept to one thread."""

from __future__ import annotations

import pytest
import torch

from hetsched.slim.model.slimresnet import SlimResNet


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def model() -> SlimResNet:
    torch.manual_seed(0)
    return SlimResNet(num_classes=10).eval()
