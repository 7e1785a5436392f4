"""Issue 19's comparison of a learned router with the best rule of each scenario, and the choice
between training runs it implies.

A router trained with another seed is another router: training three seeds and reporting the one
that did best on the *evaluation* seeds would be selection on the test set. This module scores
training runs on `hetsched slim experiment` results taken on *tuning* seeds (the ones the rules'
thresholds were chosen on, e.g. 100-104), so the run it picks can then be evaluated on seeds no
choice saw. The score is the one training keeps its best checkpoint by (attainment and accuracy,
with every point of attainment short of the best rule on a scenario charged extra), here against
the best rule of each scenario on the tuning seeds. Held-out scenarios and the paper's
reproduction scenario take no part in the choice.

Results are the ``results`` entries of an experiment's ``results.json``: per scenario, its
``held_out`` flag and per router the ``slo_attainment`` and ``accuracy_pct`` summaries (``mean``,
``ci95``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hetsched.core.errors import DataError
from hetsched.slim.router_training.validation import EpisodeScore, selection_score

TIE_POINTS = 0.1
"""Rules within this many points of the highest attainment count as tied on attainment."""

PAPER_SCENARIO = "paper"
"""The reproduction scenario, left out of the choice (issue 19's bar is on the others)."""

Summary = Mapping[str, Any]
"""One router's summary on one scenario: ``slo_attainment`` and ``accuracy_pct``, each with a
``mean`` and a ``ci95``."""


def best_rule(routers: Mapping[str, Summary]) -> tuple[str, Summary]:
    """The rule with the highest mean SLO attainment; among rules within :data:`TIE_POINTS` of
    it, the most accurate (the README's choice).

    Raises:
        ValueError: With no rules.
    """
    if not routers:
        raise ValueError("no rules to compare with")
    top = max(entry["slo_attainment"]["mean"] for entry in routers.values())
    tied = [
        name
        for name, entry in routers.items()
        if 100 * (top - entry["slo_attainment"]["mean"]) <= TIE_POINTS
    ]
    name = max(tied, key=lambda key: routers[key]["accuracy_pct"]["mean"])
    return name, routers[name]


def matches_on_attainment(learned: Summary, rule: Summary) -> bool:
    """Whether the learned router's mean attainment is at least the rule's, or their 95 %
    intervals overlap (issue 19: "better than, or within the 95 % CI of")."""
    ours, theirs = learned["slo_attainment"], rule["slo_attainment"]
    if ours["mean"] >= theirs["mean"]:
        return True
    return bool(ours["mean"] + ours["ci95"] >= theirs["mean"] - theirs["ci95"])


def run_score(
    run: Mapping[str, Mapping[str, Any]],
    rules: Mapping[str, Mapping[str, Any]],
    router: str = "learned",
) -> float:
    """One training run's score for the choice: the score that keeps the best checkpoint in
    training (:func:`~hetsched.slim.router_training.validation.selection_score`: mean of SLO
    attainment + half the accuracy, less four times the mean attainment it falls short of the
    best rule), here over the scenarios that take part in the choice, against each one's
    :func:`best_rule`.

    Args:
        run: scenario -> result entry of the run's experiment (with ``router`` among its routers).
        rules: scenario -> result entry of the rules' experiment on the same seeds.
        router: The learned router's name in ``run``.

    Raises:
        DataError: If no scenario takes part (all held out, or none in common), or ``run`` has
            no ``router`` on one that does.
    """
    scores: dict[str, EpisodeScore] = {}
    best_attainment: dict[str, float] = {}
    for scenario, entry in rules.items():
        if entry["held_out"] or scenario == PAPER_SCENARIO or scenario not in run:
            continue
        routers = run[scenario]["routers"]
        if router not in routers:
            raise DataError(f"scenario {scenario!r}: no {router!r} router among {sorted(routers)}")
        _, rule = best_rule(entry["routers"])
        best_attainment[scenario] = rule["slo_attainment"]["mean"]
        scores[scenario] = _episode_score(routers[router])
    if not scores:
        raise DataError("no scenario to choose on: every one is held out, paper or missing")
    return selection_score(scores, best_attainment)


def _episode_score(summary: Summary) -> EpisodeScore:
    """An experiment summary (attainment share, accuracy in %) as an episode score (shares)."""
    return EpisodeScore(summary["slo_attainment"]["mean"], summary["accuracy_pct"]["mean"] / 100)


def select_run(
    runs: Sequence[Mapping[str, Mapping[str, Any]]],
    rules: Mapping[str, Mapping[str, Any]],
    router: str = "learned",
) -> int:
    """Index of the training run with the highest :func:`run_score` (the first on a tie).

    Raises:
        ValueError: With no runs.
    """
    if not runs:
        raise ValueError("no training runs to choose from")
    scores = [run_score(run, rules, router) for run in runs]
    return max(range(len(runs)), key=scores.__getitem__)
