"""The paired comparison of scorers over seeds."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.tail.paired import paired_difference


def seeds(ours: list[float], base: list[float]) -> list[dict]:
    return [{"ours": {"m": a}, "base": {"m": b}} for a, b in zip(ours, base, strict=True)]


def test_a_consistent_gain_has_an_interval_below_zero_and_wins_every_seed():
    rng = np.random.default_rng(1)
    base = list(rng.uniform(400, 600, 40))
    result = paired_difference(seeds([b - 20 + rng.normal(0, 5) for b in base], base), "ours",
                               "base", "m")  # fmt: skip
    assert result["wins"] == 40 and result["losses"] == 0 and result["seeds"] == 40
    assert result["low"] < result["mean"] < result["high"] < 0
    assert result["mean"] == pytest.approx(-20, abs=3)


def test_noise_around_zero_gives_an_interval_across_zero():
    rng = np.random.default_rng(2)
    base = list(rng.uniform(400, 600, 30))
    result = paired_difference(seeds([b + rng.normal(0, 30) for b in base], base), "ours",
                               "base", "m")  # fmt: skip
    assert result["low"] < 0 < result["high"]
    assert result["wins"] + result["losses"] == 30


def test_equal_scorers_and_a_single_seed_give_a_point_interval():
    same = paired_difference(seeds([1.0, 2.0], [1.0, 2.0]), "ours", "base", "m")
    assert (same["mean"], same["low"], same["high"], same["wins"], same["losses"]) == (
        0,
        0,
        0,
        0,
        0,
    )
    one = paired_difference(seeds([3.0], [5.0]), "ours", "base", "m")
    assert one["mean"] == one["low"] == one["high"] == -2.0 and one["wins"] == 1


def test_the_interval_is_reproducible_per_seed():
    data = seeds([1.0, 4.0, 2.0, 8.0], [2.0, 3.0, 5.0, 6.0])
    assert paired_difference(data, "ours", "base", "m", seed=7) == paired_difference(
        data, "ours", "base", "m", seed=7
    )


def test_no_seeds_is_an_error():
    with pytest.raises(DataError, match="at least one seed"):
        paired_difference([], "ours", "base", "m")
