"""The best rule of a scenario, the attainment verdict, and the choice between training runs on
hand-made experiment results."""

import pytest

from hetsched.core.errors import DataError
from hetsched.slim.experiments.learned_vs_rules import (
    best_rule,
    matches_on_attainment,
    run_score,
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
