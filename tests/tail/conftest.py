"""Shared fixtures for hetsched.tail tests: synthetic monitoring rows and a fitted regressor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


def synthetic_rows(n: int = 240, seed: int = 0) -> list[dict]:
    """Rows whose P90 follows flops / (rate · cpu_eff · freq_eff) with 5 % noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n):
        flops = float(rng.choice([2e7, 2e8, 1e9, 8e9]))
        cores = int(rng.choice([1, 2, 4, 8]))
        u = float(rng.uniform(0, 0.8))
        cpu_eff, freq_eff = cores * (1 - u), 2.3 * (1 - u)
        p90 = flops / (2e11 * max(cpu_eff, 0.2) * max(freq_eff / 2.3, 0.2)) * rng.lognormal(0, 0.05)
        rows.append(
            {
                "timestamp_s": float(t),
                "model": f"m{flops:.0e}",
                "node": f"n{cores}",
                "size_mb": flops / 1e8,
                "flops": flops,
                "cores": cores,
                "u_freq": u,
                "cpu_eff": cpu_eff,
                "freq_eff_ghz": freq_eff,
                "p90_s": p90,
            }
        )
    return rows


@pytest.fixture(scope="session")
def rows() -> list[dict]:
    return synthetic_rows()


@pytest.fixture(scope="session")
def fitted(rows):
    from hetsched.tail.regressors import REGRESSORS, FittedRegressor

    model = FittedRegressor("random_forest", REGRESSORS.create("random_forest", seed=0))
    model.fit(rows)
    return model


@pytest.fixture
def repo_dir(tmp_path, rows):
    """A model repository holding one version trained on the synthetic rows."""
    from hetsched.tail.regressors import (
        REGRESSORS,
        FittedRegressor,
        ModelRepository,
    )

    model = FittedRegressor("random_forest", REGRESSORS.create("random_forest", seed=0))
    model.fit(rows)
    ModelRepository(tmp_path / "models").save(model, {"rmse_ms": 0.0, "rmsle": 0.0}, "x", {})
    return tmp_path / "models"


def write_rows_csv(rows: list[dict], path) -> None:
    import csv

    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
