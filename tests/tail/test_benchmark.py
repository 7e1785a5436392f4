"""Benchmark pieces: latency-model calibration, upstream default scoring, placement invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.tail.benchmark import (
    GIB,
    TABLE_I,
    SimNode,
    calibrate,
    default_score,
    node_capacity,
    run_benchmark,
)


def test_calibration_recovers_a_known_latency_model():
    rows = []
    for flops in (1e8, 1e9, 8e9):
        for cores in (1, 2, 4):
            for u in (0.0, 0.5):
                eff = cores * (1 - u)
                rows.append(
                    {
                        "flops": flops,
                        "cores": cores,
                        "u_freq": u,
                        "p90_s": math.exp(-22.0) * flops * eff**-0.8,
                    }
                )
    model = calibrate(rows)
    assert model.k == pytest.approx(-22.0) and model.alpha == pytest.approx(0.8)
    assert model.sigma == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(DataError):
        calibrate(rows[:2])


def test_default_score_follows_least_allocated_plus_balanced():
    node = SimNode("n", 4, 2.3, 8 * GIB)
    # fractions after the pod: cpu 2/4 = 0.5, memory 2/8 = 0.25
    least = ((1 - 0.5) + (1 - 0.25)) / 2 * 100
    balanced = (1 - abs(0.5 - 0.25) / 2) * 100
    assert default_score(node, (1.0, 1 * GIB), (1.0, 1 * GIB)) == pytest.approx(least + balanced)


def test_node_capacity_under_load_is_eq_6_to_8():
    cap = node_capacity(TABLE_I[1], 1)  # 4 busy threads of 8 cores
    assert (cap.cpu_eff, cap.freq_eff_ghz) == (4.0, pytest.approx(1.15))
    assert node_capacity(TABLE_I[0], 3).cpu_eff == 0.0


def test_run_benchmark_places_every_pod_and_reports_eq_16(rows):
    report = run_benchmark(rows, seeds=[0], pods_n=6, queries=64, slo_ms=50.0)
    seed = report["seeds"][0]
    for scorer in ("default", "p90"):
        result = seed[scorer]
        assert len(result["placement"]) == 6 == len(result["pod_p90_s"])
        node_means = []
        for name, avg in result["avg_np90_s"].items():
            on = [
                p
                for p, n in zip(result["pod_p90_s"], result["placement"], strict=True)
                if n == name
            ]
            assert avg == pytest.approx(sum(on) / len(on))  # eq. 16
            node_means.append(avg)
        assert result["mean_avg_np90_s"] == pytest.approx(np.mean(node_means))
        assert 0.0 <= result["slo_violation_rate"] <= 1.0
