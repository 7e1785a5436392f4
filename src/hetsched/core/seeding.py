"""One place to seed every random source, so simulations and training are reproducible per seed."""

from __future__ import annotations

import random

import numpy as np


def make_rng(seed: int) -> np.random.Generator:
    """Returns an independent NumPy generator for ``seed``; components take one each."""
    return np.random.default_rng(seed)


def seed_everything(seed: int) -> None:
    """Seeds Python's ``random``, NumPy's global state and torch (if imported) with ``seed``."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    try:
        import torch
    except ImportError:  # torch is a core dependency, but keep seeding usable without it
        return
    torch.manual_seed(seed)
