"""How a router does on whole episodes: the score that picks teachers and checkpoints.

Training needs one number per router and episode to (a) pick the best rule to imitate on an
episode and (b) keep the best policy seen while fine-tuning, so the learned router can never end
worse than where it started. The number is SLO attainment plus half the accuracy (both shares of
the episode's images): a point of attainment outweighs a point of accuracy, but at equal
attainment the more accurate router wins. Teachers are picked on whole (short) training
episodes; checkpoints are kept by validation episodes as long as the evaluation's, scored on the
same steady-state window (:mod:`hetsched.slim.experiments.slo_metrics`), since a policy's
warm-up transient says little about how it holds a load.

Keeping the best checkpoint by the mean score alone lets fine-tuning trade one scenario's
deadlines for another's accuracy, which issue 19's bar forbids (on *every* scenario the router
must meet as many deadlines as the best rule). :func:`selection_score` therefore also charges,
per scenario, the attainment the router falls short of the best advisor rule there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.routers.base import Router
from hetsched.slim.sim.workload import window_bounds

ACCURACY_WEIGHT = 0.5
"""Weight of accuracy against SLO attainment in the episode score."""
ATTAINMENT_TOLERANCE = 0.005
"""Default tolerance of the ``attainment-first`` and ``attainment-target`` teacher choices: rules
this close to an episode's best attainment (half a point: 15 images of a 3,000-image episode)
count as meeting it."""
ATTAINMENT_TARGET = 0.99
"""Default target of the ``attainment-target`` teacher choice: the share of deadlines a rule must
meet on an episode to count (issue 19's bursty bar, and SuperServe's way of stating an SLO)."""
SHORTFALL_WEIGHT = 4.0
"""Extra weight, in the selection score, of each point of attainment a router falls short of
the best advisor on a scenario (so such a point costs five times a point of accuracy gained)."""


@dataclass(frozen=True)
class EpisodeScore:
    """One router's result on one episode."""

    slo_attainment: float
    """Share of the episode's images that completed by their deadline."""
    accuracy: float
    """Share of the episode's images classified correctly."""

    @property
    def score(self) -> float:
        """Attainment + :data:`ACCURACY_WEIGHT` x accuracy."""
        return self.slo_attainment + ACCURACY_WEIGHT * self.accuracy


def episode_score(
    cluster: SlimCluster, router: Router, warmup_fraction: float = 0.0
) -> EpisodeScore:
    """Runs ``router`` on a fresh ``cluster`` to the end and scores the images that arrived in
    its steady-state window (:func:`~hetsched.slim.sim.workload.window_bounds`; 0: every image).

    Attainment counts against every image that arrived in the window (an unfinished one is a
    miss, as in the evaluation); accuracy is over the finished ones.
    """
    start_s, end_s = window_bounds(cluster.arrival_times_s, warmup_fraction)
    cluster.run(router)
    arrived = sum(1 for at_s in cluster.arrival_times_s if start_s <= at_s <= end_s)
    images = [image for image in cluster.completed if start_s <= image.arrival_s <= end_s]
    return EpisodeScore(
        sum(1 for image in images if image.met_slo) / max(1, arrived),
        sum(1 for image in images if image.correct) / max(1, len(images)),
    )


TeacherChoice = Literal["score", "attainment-first", "attainment-target"]
"""How a demonstration episode's teacher is picked among the candidate rules (see
:class:`TeacherPick`)."""


@dataclass(frozen=True)
class TeacherPick:
    """Picks the candidate rule to imitate on one episode, given each rule's score on it.

    ``score``: the highest :attr:`EpisodeScore.score` (attainment + half the accuracy, so two
    points of accuracy buy one point of attainment). ``attainment-first``: among the rules within
    ``tolerance`` of the episode's best attainment, the most accurate — issue 19's bar
    (attainment of the best rule, then accuracy) as a teacher, beyond the paper.
    ``attainment-target``: the same, where every rule meeting ``target`` also counts (an SLO
    stated as a share of deadlines, then accuracy). A tighter bar (``tolerance`` 0.001 and
    ``target`` 0.999) imitates the rule with the most deadlines met unless a more accurate one
    meets nearly as many, where the defaults let half a point of deadlines go for accuracy.
    """

    choice: TeacherChoice = "score"
    tolerance: float = ATTAINMENT_TOLERANCE
    """Attainment below the episode's best that still counts as meeting it."""
    target: float = ATTAINMENT_TARGET
    """With ``attainment-target``: attainment that counts as meeting the SLO."""

    def pick(self, scores: Mapping[str, EpisodeScore]) -> str:
        """The name of the rule to imitate (``scores``: rule name -> its episode score)."""
        if self.choice == "score":
            return max(scores, key=lambda name: scores[name].score)
        best = max(score.slo_attainment for score in scores.values())
        floor = best - self.tolerance
        if self.choice == "attainment-target":
            floor = min(floor, self.target)
        meeting = [n for n, s in scores.items() if s.slo_attainment >= floor]
        return max(meeting, key=lambda name: (scores[name].accuracy, scores[name].slo_attainment))


def mean_score(scores: Sequence[EpisodeScore]) -> EpisodeScore:
    """The episodes' scores averaged (each episode weighs the same)."""
    count = max(1, len(scores))
    return EpisodeScore(
        sum(s.slo_attainment for s in scores) / count, sum(s.accuracy for s in scores) / count
    )


def best_router(
    make_cluster: Callable[[], SlimCluster], routers: dict[str, Callable[[], Router]]
) -> tuple[str, dict[str, EpisodeScore]]:
    """Runs every router on its own fresh copy of one episode; the best one's name and all
    scores (ties go to the router named first)."""
    scores = {name: episode_score(make_cluster(), make()) for name, make in routers.items()}
    best = max(scores, key=lambda name: scores[name].score)
    return best, scores


def scenario_scores(named: Sequence[tuple[str, EpisodeScore]]) -> dict[str, EpisodeScore]:
    """(scenario name, episode score) pairs averaged per scenario, in first-seen order."""
    grouped: dict[str, list[EpisodeScore]] = {}
    for name, score in named:
        grouped.setdefault(name, []).append(score)
    return {name: mean_score(scores) for name, scores in grouped.items()}


def selection_score(
    per_scenario: dict[str, EpisodeScore], best_attainment: dict[str, float]
) -> float:
    """The number that keeps the best checkpoint: the mean score over scenarios minus
    :data:`SHORTFALL_WEIGHT` times the mean shortfall of attainment below ``best_attainment``
    (per scenario, the best advisor's)."""
    count = max(1, len(per_scenario))
    shortfall = sum(
        max(0.0, best_attainment.get(name, 0.0) - score.slo_attainment)
        for name, score in per_scenario.items()
    )
    mean = sum(score.score for score in per_scenario.values()) / count
    return mean - SHORTFALL_WEIGHT * shortfall / count
