"""The best rule of a scenario, the attainment verdict, and the choice between training runs on
hand-made experiment results."""

import pytest

from hetsched.core.errors import DataError
from hetsched.slim.experiments.learned_vs_rules import (
    best_rule,
    keep_or_replace,
    matches_on_attainment,
    run_score,
    score_lead_interval,
    select_run,
)


def summary(attainment: float, accuracy_pct: float, ci: float = 0.0) -> dict:
    return {
        "slo_attainment": {"mean": attainment, "ci95": ci},
        "accuracy_pct": {"mean": accuracy_pct, "ci95": 0.0},
    }


def entry(routers: dict, held_out: bool = False) -> dict:
    return {"held_out": held_out, "routers": routers}


def test_best_rule_is_the_most_accurate_within_a_tenth_of_a_point_of_the_top_attainment():
    routers = {
        "safe": summary(1.0, 70.0),
        "tied": summary(0.9995, 73.0),  # 0.05 points below the top: tied
        "risky": summary(0.997, 74.0),  # 0.3 points below: not tied
    }
    assert best_rule(routers)[0] == "tied"
    with pytest.raises(ValueError, match="no rules"):
        best_rule({})


def test_attainment_matches_when_higher_or_when_the_intervals_overlap():
    rule = summary(0.999, 73.0, ci=0.0005)
    assert matches_on_attainment(summary(0.9995, 70.0), rule)
    assert matches_on_attainment(summary(0.997, 70.0, ci=0.002), rule)  # 0.999 > 0.9985
    assert not matches_on_attainment(summary(0.997, 70.0, ci=0.001), rule)  # 0.998 < 0.9985


def test_the_choice_charges_missed_deadlines_and_ignores_held_out_and_paper_scenarios():
    rules = {
        "lan": entry({"wide": summary(1.0, 76.0), "slim": summary(1.0, 70.0)}),
        "bursty": entry({"safe": summary(1.0, 73.0)}),
        "held": entry({"safe": summary(1.0, 73.0)}, held_out=True),
        "paper": entry({"safe": summary(0.5, 69.0)}),
    }

    def run(bursty: float, bursty_acc: float, held: float) -> dict:
        return {
            "lan": entry({"learned": summary(1.0, 76.0)}),
            "bursty": entry({"learned": summary(bursty, bursty_acc)}),
            "held": entry({"learned": summary(held, 80.0)}, held_out=True),
            "paper": entry({"learned": summary(0.0, 0.0)}),
        }

    exact = run(1.0, 73.0, 0.0)
    # mean of attainment + half the accuracy over lan and bursty; nothing short of the rules
    assert run_score(exact, rules) == pytest.approx(1.0 + 0.5 * (0.76 + 0.73) / 2)
    # one point of bursty deadlines for two of accuracy: +0.01 score, -0.01 - 4 x 0.01 shortfall,
    # both over two scenarios
    trade = run(0.99, 75.0, 1.0)
    assert run_score(trade, rules) == pytest.approx(run_score(exact, rules) - 0.04 / 2)
    # held-out scenarios and paper do not move the choice
    assert select_run([trade, exact, run(1.0, 73.0, 1.0)], rules) == 1
    with pytest.raises(ValueError, match="no training runs"):
        select_run([], rules)
    with pytest.raises(DataError, match="no scenario"):
        run_score(exact, {"held": rules["held"], "paper": rules["paper"]})
    no_learned = {name: entry({"other": summary(1.0, 70.0)}) for name in ("lan", "bursty")}
    with pytest.raises(DataError, match="no 'learned' router"):
        run_score(no_learned, rules)


def seeded(values: list[tuple[float, float]]) -> dict:
    """A summary with per-seed runs (attainment share, accuracy %), its means over them."""
    runs = [{"slo_attainment": a, "accuracy_pct": acc} for a, acc in values]
    n = len(values)
    return {
        "slo_attainment": {"mean": sum(a for a, _ in values) / n, "ci95": 0.0},
        "accuracy_pct": {"mean": sum(acc for _, acc in values) / n, "ci95": 0.0},
        "runs": runs,
    }


def test_a_lead_on_every_seed_has_an_interval_above_zero_and_equal_runs_tie():
    rules = {"bursty": entry({"safe": seeded([(1.0, 70.0), (1.0, 71.0), (1.0, 69.0)])})}
    base = [(0.999, 73.0), (0.998, 72.0), (1.0, 74.0)]
    a = {"bursty": entry({"learned": seeded(base)})}
    better = {"bursty": entry({"learned": seeded([(x, y + 1.0) for x, y in base])})}
    assert score_lead_interval(a, a, rules) == (0.0, 0.0)
    low, high = score_lead_interval(better, a, rules, resamples=200)
    assert 0.0 < low <= high  # one point more accuracy on every seed: +0.005 on each draw
    assert low == pytest.approx(0.005) and high == pytest.approx(0.005)
    # a lead on one seed and a loss on another: the interval straddles zero
    mixed = {"bursty": entry({"learned": seeded([(0.999, 75.0), (0.998, 70.0), (1.0, 74.0)])})}
    low, high = score_lead_interval(mixed, a, rules, resamples=500, seed=1)
    assert low < 0.0 < high
    assert score_lead_interval(mixed, a, rules, resamples=50, seed=3) == score_lead_interval(
        mixed, a, rules, resamples=50, seed=3
    )


def test_the_lead_interval_needs_per_seed_runs_of_one_length():
    rules = {"bursty": entry({"safe": seeded([(1.0, 70.0), (1.0, 71.0)])})}
    two = {"bursty": entry({"learned": seeded([(1.0, 73.0), (1.0, 72.0)])})}
    three = {"bursty": entry({"learned": seeded([(1.0, 73.0), (1.0, 72.0), (1.0, 71.0)])})}
    with pytest.raises(DataError, match="per-seed runs differ"):
        score_lead_interval(two, three, rules)
    with pytest.raises(DataError, match="per-seed runs differ or are missing"):
        score_lead_interval({"bursty": entry({"learned": summary(1.0, 73.0)})}, two, rules)
    with pytest.raises(ValueError, match="resamples"):
        score_lead_interval(two, two, rules, resamples=0)


def test_the_incumbent_stays_on_a_tie_and_gives_way_to_a_lead_on_every_seed():
    rules = {"bursty": entry({"safe": seeded([(1.0, 70.0), (1.0, 71.0), (1.0, 69.0)])})}
    base = [(0.999, 73.0), (0.998, 72.0), (1.0, 74.0)]
    shipped = {"bursty": entry({"learned": seeded(base)})}
    better = {"bursty": entry({"learned": seeded([(x, y + 1.0) for x, y in base])})}
    # a higher mean score, but a loss on one seed: its interval reaches below 0
    mixed = {"bursty": entry({"learned": seeded([(0.999, 76.0), (0.998, 70.0), (1.0, 74.0)])})}
    assert keep_or_replace([shipped, mixed], rules, incumbent=0)[0] == 0
    chosen, (low, _) = keep_or_replace([shipped, better, mixed], rules, incumbent=0)
    assert chosen == 1 and low > 0.0
    assert keep_or_replace([better, shipped], rules, incumbent=0) == (0, None)  # already best
    with pytest.raises(ValueError, match="incumbent 2 is not one of the 2 runs"):
        keep_or_replace([shipped, better], rules, incumbent=2)
