"""The score that keeps the best checkpoint charges any scenario where the router meets fewer
deadlines than the best rule there, so fine-tuning cannot buy accuracy with one scenario's SLO."""

import pytest

from hetsched.slim.router_training.validation import (
    SHORTFALL_WEIGHT,
    EpisodeScore,
    scenario_scores,
    selection_score,
)


def test_scenario_scores_average_per_scenario_in_first_seen_order():
    named = [("a", EpisodeScore(1.0, 0.7)), ("b", EpisodeScore(0.5, 0.8)),
             ("a", EpisodeScore(0.8, 0.5))]  # fmt: skip
    scores = scenario_scores(named)
    assert list(scores) == ["a", "b"]
    assert scores["a"].slo_attainment == pytest.approx(0.9) and scores["a"].accuracy == 0.6


def test_a_shortfall_on_one_scenario_outweighs_more_accuracy_elsewhere():
    best = {"lan": 1.0, "slow": 1.0}
    safe = {"lan": EpisodeScore(1.0, 0.72), "slow": EpisodeScore(1.0, 0.72)}
    greedy = {"lan": EpisodeScore(1.0, 0.80), "slow": EpisodeScore(0.97, 0.80)}
    # by the plain mean score the greedy router wins ...
    assert sum(s.score for s in greedy.values()) > sum(s.score for s in safe.values())
    # ... by the selection score the one that never falls short does
    assert selection_score(safe, best) > selection_score(greedy, best)
    shortfall = 0.03 / 2
    plain = sum(s.score for s in greedy.values()) / 2
    assert selection_score(greedy, best) == pytest.approx(plain - SHORTFALL_WEIGHT * shortfall)


def test_meeting_more_deadlines_than_the_best_rule_is_not_charged():
    scores = {"lan": EpisodeScore(1.0, 0.7)}
    assert selection_score(scores, {"lan": 0.9}) == pytest.approx(scores["lan"].score)
