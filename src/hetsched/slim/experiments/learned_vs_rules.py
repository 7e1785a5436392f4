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

import numpy as np

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


def keep_or_replace(
    runs: Sequence[Mapping[str, Mapping[str, Any]]],
    rules: Mapping[str, Mapping[str, Any]],
    incumbent: int,
    router: str = "learned",
) -> tuple[int, tuple[float, float] | None]:
    """The run to ship when ``runs[incumbent]`` ships now: the highest-scoring run
    (:func:`select_run`) only if its lead over the incumbent has a 95 % interval above 0
    (:func:`score_lead_interval`), else the incumbent. Returns the index and that interval
    (None when the incumbent scores highest).

    Why: scores of routers trained alike differ in the fourth decimal, and a lead whose interval
    reaches 0 is a tie; replacing the shipped router on a tie changes what users get for no
    measured reason (RESULTS, "both backlog advisors again, with block predictions").

    Raises:
        ValueError: With no runs or an incumbent index out of range.
    """
    if not 0 <= incumbent < len(runs):
        raise ValueError(f"incumbent {incumbent} is not one of the {len(runs)} runs")
    best = select_run(runs, rules, router)
    if best == incumbent:
        return incumbent, None
    low, high = score_lead_interval(runs[best], runs[incumbent], rules, router)
    return (best if low > 0.0 else incumbent), (low, high)


def score_lead_interval(
    first: Mapping[str, Mapping[str, Any]],
    second: Mapping[str, Mapping[str, Any]],
    rules: Mapping[str, Mapping[str, Any]],
    router: str = "learned",
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """The 95 % interval of ``run_score(first) - run_score(second)`` when the evaluation seeds
    are drawn again with replacement (a paired bootstrap: each draw takes the same seeds for both
    runs and for the rules, whose best rule is chosen again on them).

    Why: the choice between training runs compares scores that differ in the fourth decimal; a
    lead whose interval includes 0 is a tie, and the pick between tied runs says nothing
    (RESULTS, "both backlog advisors at once": a 0.0001 lead on tuning seeds became 0.26 point
    fewer bursty deadlines on the evaluation seeds).

    Raises:
        DataError: If a summary lacks its per-seed ``runs`` or the runs' seed counts differ.
        ValueError: If ``resamples`` < 1.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    seeds = _seed_count([first, second, rules])
    rng = np.random.default_rng(seed)
    leads = []
    for _ in range(resamples):
        draw = rng.integers(0, seeds, seeds)
        leads.append(
            run_score(_redrawn(first, draw), _redrawn(rules, draw), router)
            - run_score(_redrawn(second, draw), _redrawn(rules, draw), router)
        )
    low, high = np.percentile(leads, [2.5, 97.5])
    return float(low), float(high)


def _seed_count(results: Sequence[Mapping[str, Mapping[str, Any]]]) -> int:
    """The one number of per-seed runs every summary of ``results`` holds."""
    counts = {
        len(summary.get("runs") or ())
        for result in results
        for entry in result.values()
        for summary in entry["routers"].values()
    }
    if len(counts) != 1 or 0 in counts:
        raise DataError(f"per-seed runs differ or are missing (counts {sorted(counts)})")
    return counts.pop()


def _redrawn(
    result: Mapping[str, Mapping[str, Any]], draw: np.ndarray
) -> dict[str, dict[str, Any]]:
    """``result`` with every summary's means taken over the seeds ``draw`` picks."""
    out: dict[str, dict[str, Any]] = {}
    for scenario, entry in result.items():
        routers = {}
        for name, summary in entry["routers"].items():
            runs = [summary["runs"][i] for i in draw]
            routers[name] = {
                key: {"mean": float(np.mean([run[key] for run in runs])), "ci95": 0.0}
                for key in ("slo_attainment", "accuracy_pct")
            }
        out[scenario] = {"held_out": entry["held_out"], "routers": routers}
    return out
