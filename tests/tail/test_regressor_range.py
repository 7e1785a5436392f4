"""A regressor never extrapolates: inputs outside the training range are clamped to it.

Trained on nodes of one and two cores, an MLP predicted eight-core nodes slower than one-core
ones (benchmarks/RESULTS.md, "a regressor never extrapolates"); every regressor now answers a
node beyond its grid with the prediction at the grid's edge, and a saved version keeps its range.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.tail.regressors import (
    NODE_COLUMNS,
    REGRESSORS,
    FittedRegressor,
    ModelRepository,
    feature_matrix,
)

from .conftest import synthetic_rows


def small_node_rows() -> list[dict]:
    """The synthetic rows of nodes with at most two cores (cpu_eff <= 2)."""
    return [r for r in synthetic_rows(320, seed=3) if r["cores"] <= 2]


def _node(row: dict, cpu_eff: float, freq_eff_ghz: float) -> dict:
    return {**row, "cpu_eff": cpu_eff, "freq_eff_ghz": freq_eff_ghz}


@pytest.mark.parametrize("name", REGRESSORS.names())
def test_nodes_beyond_the_grid_get_the_edge_prediction(name):
    rows = small_node_rows()
    fitted = FittedRegressor(name, REGRESSORS.create(name, seed=0)).fit(rows)
    high = max(r["cpu_eff"] for r in rows), max(r["freq_eff_ghz"] for r in rows)
    low = min(r["cpu_eff"] for r in rows), min(r["freq_eff_ghz"] for r in rows)
    assert fitted.node_range() == {"cpu_eff": (low[0], high[0]), "freq_eff_ghz": (low[1], high[1])}
    model = rows[0]
    edge, beyond = fitted.predict_p90_s([_node(model, *high), _node(model, 8.0, 4.0)])
    assert beyond == pytest.approx(edge, rel=1e-12)
    edge, below = fitted.predict_p90_s([_node(model, *low), _node(model, 0.0, 0.0)])
    assert below == pytest.approx(edge, rel=1e-12)
    # Inside the range the clamp changes nothing.
    inside = FittedRegressor(name, fitted.estimator).predict_p90_s(rows[:20])
    np.testing.assert_allclose(fitted.predict_p90_s(rows[:20]), inside, rtol=1e-12)


def test_the_model_size_still_scales_a_clamped_prediction():
    # A model with 4x the FLOPs of every training row (same FLOPs per weight byte): its inputs
    # are clamped, and its P90 is the edge model's time per GFLOP times its own GFLOPs.
    rows = small_node_rows()
    fitted = FittedRegressor("random_forest", REGRESSORS.create("random_forest", seed=0)).fit(rows)
    biggest = max(rows, key=lambda r: r["flops"])
    larger = {**biggest, "flops": 4 * biggest["flops"], "size_mb": 4 * biggest["size_mb"]}
    edge, beyond = fitted.predict_p90_s([biggest, larger])
    assert beyond == pytest.approx(4 * edge, rel=1e-9)


def test_repository_keeps_the_range_and_checks_it(tmp_path, caplog):
    rows = small_node_rows()
    fitted = FittedRegressor("xgboost", REGRESSORS.create("xgboost", seed=0)).fit(rows)
    repo = ModelRepository(tmp_path / "models")
    version = repo.save(fitted, {}, "x", {})
    loaded, _ = repo.load()
    assert loaded.input_range is not None
    np.testing.assert_array_equal(loaded.input_range, fitted.input_range)
    far = [_node(rows[0], 16.0, 3.5)]
    assert loaded.predict_p90_s(far) == pytest.approx(fitted.predict_p90_s(far), rel=1e-6)
    meta_path = tmp_path / "models" / version / "meta.json"
    meta = json.loads(meta_path.read_text())
    columns = feature_matrix(rows[:1]).shape[1]
    for bad in (
        [[0.0] * columns],
        [[0.0] * columns, [1.0] * (columns - 1)],
        [[1.0] * columns, [0.0] * columns],
        [[0.0] * columns, [float("nan")] * columns],
        "wide",
        {"low": 0},
    ):
        meta_path.write_text(json.dumps({**meta, "input_range": bad}))
        with pytest.raises(DataError, match=r"input_range in meta\.json"):
            repo.load()
    # A version saved before ranges were kept loads, unclamped.
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k != "input_range"}))
    with caplog.at_level("WARNING", logger="hetsched.tail.regressors"):
        assert repo.load()[0].input_range is None
    assert "no input range" in caplog.text and version in caplog.text


def test_a_mean_reverting_regressor_clamps_the_node_inputs_only():
    """The Gaussian process returns to its training mean away from the data, so a model beyond
    the grid keeps its own inputs (leave-one-model-out 0.39 -> 0.22 on the dense grid); a node
    beyond the grid is still clamped to the edge."""
    rows = small_node_rows()
    fitted = FittedRegressor("gaussian_process", REGRESSORS.create("gaussian_process", seed=0))
    fitted.fit(rows)
    biggest = max(rows, key=lambda r: r["flops"])
    larger = _node(
        {**biggest, "flops": 4 * biggest["flops"], "size_mb": 4 * biggest["size_mb"]}, 16.0, 4.0
    )
    x = feature_matrix([larger])
    low, high = fitted.input_range
    assert x[0, 1] > high[1]  # the model's log10 FLOPs lie beyond the grid
    x[:, NODE_COLUMNS] = np.clip(x[:, NODE_COLUMNS], low[NODE_COLUMNS], high[NODE_COLUMNS])
    expected = np.exp(fitted.estimator.predict(x)[0]) * larger["flops"] / 1e9 / 1e3
    assert fitted.predict_p90_s([larger])[0] == pytest.approx(expected, rel=1e-9)
    assert x[0, 1] > high[1] and x[0, 2] == high[2]  # model input kept, node input clamped
