"""Regressors saved as JSON parameters predict exactly as the fitted estimators, and loading a
repository never unpickles anything."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.tail import portable_regressors
from hetsched.tail.portable_regressors import (
    GP_MAX_TRAINING_POINTS,
    from_document,
    portable,
    to_document,
)
from hetsched.tail.regressors import (
    REGRESSORS,
    FittedRegressor,
    ModelRepository,
    feature_matrix,
    fit_quietly,
    log_target,
)


@pytest.mark.parametrize("name", REGRESSORS.names())
def test_json_round_trip_predicts_like_the_estimator(name, rows):
    estimator = REGRESSORS.create(name, seed=0)
    if name == "mlp":
        estimator.set_params(mlpregressor__max_iter=200)
    fit_quietly(estimator, feature_matrix(rows), log_target(rows))
    x = feature_matrix(rows[:50])
    # A JSON text round trip: what the repository writes and reads.
    loaded = from_document(json.loads(json.dumps(to_document(estimator))), "mem")
    np.testing.assert_allclose(loaded.predict(x), estimator.predict(x), rtol=1e-6, atol=1e-9)
    # Inputs between the training points exercise the thresholds, not only the seen rows.
    between = (x[:-1] + x[1:]) / 2
    np.testing.assert_allclose(
        loaded.predict(between), estimator.predict(between), rtol=1e-6, atol=1e-9
    )


def test_repository_writes_json_and_refuses_pickles(tmp_path, fitted):
    repo = ModelRepository(tmp_path / "m")
    version = repo.save(fitted, {"rmsle": 0.1}, "fp", {})
    assert not list((tmp_path / "m").rglob("*.pkl"))
    loaded, meta = repo.load()
    rows = [{"size_mb": 10.0, "flops": 1e9, "cpu_eff": 2.0, "freq_eff_ghz": 2.3}]
    assert loaded.predict_p90_s(rows) == pytest.approx(fitted.predict_p90_s(rows))
    assert meta["version"] == version

    class Payload:  # would run on unpickling
        def __reduce__(self):
            return (exec, ("raise SystemExit('pickle ran')",))

    (tmp_path / "m" / "v0002").mkdir()
    (tmp_path / "m" / "v0002" / "model.pkl").write_bytes(pickle.dumps(Payload()))
    (tmp_path / "m" / "latest").write_text("v0002")
    with pytest.raises(DataError, match="pickled model, which is no longer loaded"):
        repo.load()
    with pytest.raises(DataError, match="bad model version"):
        repo.load("../../etc")


@pytest.mark.parametrize(
    "document",
    [
        {"format": "other"},
        {"format": "hetsched-regressor", "version": 99, "kind": "tree_ensemble"},
        {"format": "hetsched-regressor", "version": 1, "kind": "pickle", "params": {}},
        {"format": "hetsched-regressor", "version": 1, "kind": "tree_ensemble", "params": {}},
        {
            "format": "hetsched-regressor",
            "version": 1,
            "kind": "tree_ensemble",
            "params": {
                "roots": [0],
                "left": [5, -1],
                "right": [1, -1],
                "feature": [0, 0],
                "threshold": [0.0, 0.0],
                "value": [0.0, 1.0],
                "max_depth": 1,
            },
        },
        {
            "format": "hetsched-regressor",
            "version": 1,
            "kind": "dense_network",
            "params": {
                "mean": [0.0],
                "scale": [1.0],
                "weights": [[[1.0, 2.0]]],
                "biases": [[0.0]],
                "activation": "relu",
            },
        },
    ],
)
def test_malformed_model_files_are_data_errors(document):
    with pytest.raises(DataError):
        from_document(document, "m.json")


def test_unknown_estimator_has_no_portable_form():
    with pytest.raises(DataError, match="no portable form"):
        portable(object())


def test_fitted_regressor_predicts_through_the_portable_form(fitted):
    twin = FittedRegressor(fitted.name, portable(fitted.estimator))
    rows = [
        {"size_mb": s, "flops": 1e9, "cpu_eff": c, "freq_eff_ghz": 2.3}
        for s, c in [(1, 1), (50, 8)]
    ]
    np.testing.assert_allclose(twin.predict_p90_s(rows), fitted.predict_p90_s(rows))


def test_a_gaussian_process_file_whose_arrays_do_not_fit_is_refused(rows):
    estimator = REGRESSORS.create("gaussian_process", seed=0)
    fit_quietly(estimator, feature_matrix(rows[:40]), log_target(rows[:40]))
    document = to_document(estimator)
    assert document["kind"] == "gaussian_process"
    for key, bad in (
        ("dual_coef", [1.0, 2.0]),  # one coefficient per training input
        ("length_scale", [0.0] * 5),  # a zero length scale divides by zero
        ("train_x", [[0.0, 1.0]] * 40),  # training inputs narrower than the scaler
    ):
        broken = {**document, "params": {**document["params"], key: bad}}
        with pytest.raises(DataError, match="Gaussian process arrays do not fit together"):
            from_document(broken, "mem")
    with pytest.raises(DataError, match="malformed gaussian_process parameters"):
        from_document({**document, "params": {"mean": [0.0]}}, "mem")
    with pytest.raises(DataError, match="must be finite numbers"):
        from_document({**document, "params": {**document["params"], "y_mean": float("nan")}}, "m")
    huge = {
        **document["params"],
        "train_x": [[0.0] * 5] * (GP_MAX_TRAINING_POINTS + 1),
        "dual_coef": [0.0] * (GP_MAX_TRAINING_POINTS + 1),
    }
    with pytest.raises(DataError, match="training inputs"):
        from_document({**document, "params": huge}, "mem")


def test_a_gaussian_process_predicts_many_rows_in_slices_as_in_one(rows, monkeypatch):
    estimator = REGRESSORS.create("gaussian_process", seed=0)
    fit_quietly(estimator, feature_matrix(rows), log_target(rows))
    model = portable(estimator)
    x = feature_matrix(rows)
    whole = model.predict(x)
    monkeypatch.setattr(portable_regressors, "GP_SLICE_ELEMENTS", len(model.train_x) * 7)
    np.testing.assert_allclose(model.predict(x), whole, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whole, estimator.predict(x), rtol=1e-6, atol=1e-9)
