"""Eq. 15 smoothing, CSV loading, Table III comparison, grid search and the model repository."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.tail.dataset import (
    load_csv,
    log_window_smooth,
    repeat_spread,
    smooth_target,
    with_arrival_features,
    write_dataset_csv,
)
from hetsched.tail.regressors import (
    ModelRepository,
    compare_regressors,
    data_fingerprint,
    rmse,
    rmsle,
    summarize_splits,
    train_and_save,
)

from .conftest import write_rows_csv


def test_eq15_log_window():
    s = [1.0, 3.0, 7.0]
    m = log_window_smooth(s, 2)
    assert m[0] == pytest.approx(math.log(2))  # min(w, i) = 1 at i = 1
    assert m[1] == pytest.approx((math.log(2) + math.log(4)) / 2)
    assert m[2] == pytest.approx((math.log(4) + math.log(8)) / 2)
    with pytest.raises(DataError):
        log_window_smooth(s, 0)


def test_smoothing_is_per_series_and_damps_outliers():
    rows = [
        {"timestamp_s": float(t), "model": "a", "node": "n", "p90_s": v}
        for t, v in enumerate([0.1, 0.1, 5.0, 0.1])
    ]
    rows.append({"timestamp_s": 2.5, "model": "b", "node": "n", "p90_s": 9.0})
    out = smooth_target(rows, 3)
    a = [r["p90_s"] for r in out if r["model"] == "a"]
    assert a[0] == pytest.approx(0.1) and a[2] < 5.0
    assert next(r["p90_s"] for r in out if r["model"] == "b") == pytest.approx(9.0)


def test_csv_errors_name_line_and_field(tmp_path, rows):
    path = tmp_path / "d.csv"
    bad = [dict(r) for r in rows[:3]]
    bad[1]["flops"] = "lots"
    write_rows_csv(bad, path)
    with pytest.raises(DataError, match=r"d\.csv:3") as err:
        load_csv(path)
    assert "flops" in str(err.value)
    with pytest.raises(DataError, match="not found"):
        load_csv(tmp_path / "none.csv")


def test_metrics():
    y = np.array([1.0, 2.0])
    assert rmse(y, y) == 0 and rmsle(y, y) == 0
    assert rmsle(np.array([0.0]), np.array([math.e - 1])) == pytest.approx(1.0)


def test_table_iii_and_repository(tmp_path, rows):
    table = compare_regressors(rows, seed=0)
    assert {r["regressor"] for r in table} == {
        "random_forest",
        "xgboost",
        "mlp",
        "gaussian_process",
    }
    assert min(r["rmsle"] for r in table) < 0.2
    assert all(r["rmse_ms"] > 0 and r["test_rows"] == 60 for r in table)
    repo = ModelRepository(tmp_path / "m")
    first = train_and_save(rows, repo, seed=0)
    second = train_and_save(rows[:160], repo, seed=1, chosen=("xgboost", "told"))
    assert first["chosen_by"] == "random split"
    assert first["best"] == min(first["table_iii"], key=lambda r: r["rmsle"])["regressor"]
    assert (second["best"], second["chosen_by"]) == ("xgboost", "told")
    assert (first["version"], second["version"]) == ("v0001", "v0002")
    _, meta = repo.load()
    assert meta["version"] == "v0002" and meta["data_fingerprint"] == data_fingerprint(rows[:160])
    assert meta["features"] == ["size_mb", "flops", "cpu_eff", "freq_eff_ghz"]
    old, _ = repo.load("v0001")
    pred = old.predict_p90_s(rows[:5])
    assert rmsle(np.array([r["p90_s"] for r in rows[:5]]) * 1e3, pred * 1e3) < 0.3
    with pytest.raises(DataError, match="empty"):
        ModelRepository(tmp_path / "empty").load()


def test_table_iii_over_splits():
    tables = [
        [{"regressor": "rf", "rmsle": 0.2}, {"regressor": "mlp", "rmsle": 0.5}],
        [{"regressor": "rf", "rmsle": 0.4}, {"regressor": "mlp", "rmsle": 0.1}],
    ]
    rf, mlp = summarize_splits(tables)
    assert rf == {
        "regressor": "rf",
        "splits": 2,
        "rmsle_mean": pytest.approx(0.3),
        "rmsle_min": 0.2,
        "rmsle_max": 0.4,
    }
    assert (mlp["rmsle_min"], mlp["rmsle_max"]) == (0.1, 0.5)
    with pytest.raises(DataError, match="splits"):
        summarize_splits([])


def test_arrival_features_swap_in_and_must_exist():
    row = {"cpu_eff": 1.5, "freq_eff_ghz": 2.0, "cpu_eff_arrival": "0.5", "freq_eff_arrival_ghz": 1}
    (swapped,) = with_arrival_features([row])
    assert (swapped["cpu_eff"], swapped["freq_eff_ghz"]) == (0.5, 1.0)
    with pytest.raises(DataError, match="arrival"):
        with_arrival_features([{"cpu_eff": 1.0, "freq_eff_ghz": 2.0}])


def _cell(model: str, duty: str, log1p_ms: float) -> dict:
    return {
        "model": model,
        "node": "n",
        "torch_threads": "1",
        "contention_duty": duty,
        "p90_s": math.expm1(log1p_ms) / 1e3,
    }


def test_repeat_spread_pools_within_cell_deviations():
    rows = [
        _cell("a", "0", 1.0),
        _cell("a", "0", 3.0),  # cell mean 2: squares 2, one degree of freedom
        _cell("a", "0.4", 2.0),
        _cell("a", "0.4", 2.0),  # squares 0, one degree of freedom
        _cell("b", "0", 5.0),  # single: not a repeat, ignored
    ]
    spread = repeat_spread(rows)
    assert (spread["cells"], spread["rows"]) == (2, 4)
    assert spread["rmsle_floor"] == pytest.approx(1.0)  # sqrt(2 / 2)
    ratio_a = math.expm1(3.0) / math.expm1(1.0)
    assert spread["median_max_over_min"] == pytest.approx((ratio_a + 1.0) / 2)
    with pytest.raises(DataError, match="repeats"):
        repeat_spread(rows[-1:])
    with pytest.raises(DataError, match="cell column"):
        repeat_spread([{"model": "a", "p90_s": 1.0}])


def test_dataset_csv_keeps_cell_columns(tmp_path, rows):
    cells = [{**r, "torch_threads": 1, "contention_duty": 0.4} for r in rows[:4]]
    write_dataset_csv(cells, tmp_path / "d.csv")
    loaded = load_csv(tmp_path / "d.csv")
    assert loaded[0]["contention_duty"] == "0.4" and "u_freq" not in loaded[0]
