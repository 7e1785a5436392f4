"""Who labels each decision of a demonstration episode: one rule, or the rule a rollout picks.

Beyond the paper (issue 19). Behaviour cloning and DAgger copy a *teacher*; until now a teacher
was one rule per episode (the episode's best, :func:`~hetsched.slim.router_training.validation.
TeacherPick`). One rule per episode cannot show *when* to switch: on a bursty episode the best
single rule is the one that survives the bursts (a slim join-shortest-queue), and the calm
stretches between bursts, where a wider rule would have met every deadline too, are labelled
with the slim rule as well.

:class:`RolloutTeacher` labels per chunk of decisions with Bertsekas' rollout algorithm over
several base heuristics: at the start of every chunk the simulated cluster is copied once per
candidate rule, each copy runs to the end of the episode under its rule, and the rule whose copy
scores best (same choice as the per-episode teacher) labels the chunk. A simulated episode is
deterministic per seed and the rules keep no state that the copies do not copy, so the rule
picked at one chunk, continued, is a candidate at the next chunk with the same score: without a
driver the rollout's own episode scores at least as well as the best single rule on that
episode (checked by a test). The copies see the episode's future arrivals, which a router cannot;
cloning keeps what the observation can predict. With a
:class:`~hetsched.slim.sim.future_arrivals.FutureSampler` each candidate is scored instead on
``samples`` futures drawn from the arrival process given what a router sees now (the same draws
for every candidate), so the labels depend only on the present.
"""

from __future__ import annotations

import copy
import math
from typing import Protocol

import numpy as np

from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.router_training.validation import (
    EpisodeScore,
    TeacherPick,
    episode_score,
    mean_score,
)
from hetsched.slim.routers.base import Router
from hetsched.slim.routers.specs import create_router
from hetsched.slim.sim.future_arrivals import FutureSampler


def fork(cluster: SlimCluster) -> SlimCluster:
    """An independent copy of ``cluster`` mid-episode that shares its result records (completed
    images, block outcomes): read-only once made, they were most of a deep copy's cost."""
    shared: dict[int, object] = {id(image): image for image in cluster.completed}
    shared.update((id(outcome), outcome) for outcome in cluster.block_outcomes)
    return copy.deepcopy(cluster, shared)


class Labeller(Protocol):
    """Names the rule that labels a decision, and gives that rule (it decides the label)."""

    def teacher(self, decision: int, cluster: SlimCluster) -> tuple[str, Router]:
        """The rule labelling decision number ``decision`` (0-based) of the episode, whose
        cluster waits for that decision."""
        ...


class FixedTeacher:
    """One rule labels every decision of the episode."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.router: Router = create_router(name, seed)

    def teacher(self, decision: int, cluster: SlimCluster) -> tuple[str, Router]:
        return self.name, self.router


def horizon_score(cluster: SlimCluster, router: Router, decisions: int) -> EpisodeScore:
    """Runs ``router`` for at most ``decisions`` decisions and scores the images whose fate
    is then known and that the decisions could touch: those that arrived from one SLO before
    the start (still in flight) to one SLO before the end (later ones may still make it).
    With an infinite SLO, or when the episode ends first, this is the rest of the episode."""
    slo_s = cluster.config.slo_s
    start_s = cluster.clock.now_s() - slo_s
    for _ in range(decisions):
        state = cluster.next_state()
        if state is None:
            break
        cluster.route(router.decide(state))
    end_s = math.inf if cluster.done else cluster.clock.now_s() - slo_s
    arrived = sum(1 for at_s in cluster.arrival_times_s if start_s <= at_s <= end_s)
    if not math.isfinite(slo_s) or arrived == 0:
        return episode_score(cluster, router)  # no image's fate settled yet: run to the end
    images = [image for image in cluster.completed if start_s <= image.arrival_s <= end_s]
    return EpisodeScore(
        sum(1 for image in images if image.met_slo) / max(1, arrived),
        sum(1 for image in images if image.correct) / max(1, len(images)),
    )


class RolloutTeacher:
    """Per chunk of ``chunk_decisions`` decisions, the candidate rule whose rollout to the end
    of the episode scores best (module docstring).

    Args:
        candidates: Registered rule names (one instance each, kept for the whole episode).
        seed: Seed of every rule instance.
        chunk_decisions: Decisions between two rollouts.
        choice: How the rollouts' scores pick the rule (:class:`TeacherPick`).
        horizon_decisions: Decisions per rollout (:func:`horizon_score`); None: to the end of
            the episode (exact, and the improvement property holds, but each chunk then costs
            one run of the rest of the episode per candidate).
        futures: None: rollouts see the episode's own future (clairvoyant); else each runs on
            ``samples`` futures drawn by this sampler (seeded by ``seed`` and the chunk).
        samples: Futures per candidate and chunk with ``futures``.

    Attributes:
        chunks: Chunks each rule labelled so far.
        rollout_scores: The picked rule's rollout score at every chunk (non-decreasing without a
            driver and horizon: the rollout improvement property).
    """

    def __init__(
        self,
        candidates: tuple[str, ...],
        seed: int,
        chunk_decisions: int,
        choice: TeacherPick = TeacherPick(),
        horizon_decisions: int | None = None,
        futures: FutureSampler | None = None,
        samples: int = 1,
    ) -> None:
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        if not candidates:
            raise ValueError("a rollout teacher needs at least one candidate rule")
        if chunk_decisions < 1:
            raise ValueError(f"chunk_decisions must be >= 1, got {chunk_decisions}")
        self.routers: dict[str, Router] = {name: create_router(name, seed) for name in candidates}
        if horizon_decisions is not None and horizon_decisions < chunk_decisions:
            raise ValueError(
                f"horizon_decisions ({horizon_decisions}) must cover a chunk ({chunk_decisions})"
            )
        self.chunk_decisions = chunk_decisions
        self.horizon_decisions = horizon_decisions
        self.choice = choice
        self.futures = futures
        self.samples = samples if futures is not None else 1
        self.seed = seed
        self.current = candidates[0]
        self.chunks: dict[str, int] = {}
        self.rollout_scores: list[EpisodeScore] = []

    def teacher(self, decision: int, cluster: SlimCluster) -> tuple[str, Router]:
        if decision % self.chunk_decisions == 0:
            chunk = decision // self.chunk_decisions
            scores = {
                name: mean_score(
                    [self._rollout(cluster, router, chunk, k) for k in range(self.samples)]
                )
                for name, router in self.routers.items()
            }
            self.current = self.choice.pick(scores)
            self.chunks[self.current] = self.chunks.get(self.current, 0) + 1
            self.rollout_scores.append(scores[self.current])
        return self.current, self.routers[self.current]

    def _rollout(
        self, cluster: SlimCluster, router: Router, chunk: int, sample: int
    ) -> EpisodeScore:
        """One candidate's score on a copy of ``cluster``: its own future, or draw ``sample``."""
        copied = fork(cluster)
        if self.futures is not None:
            self.futures.resample(copied, np.random.default_rng((self.seed, chunk, sample)))
        if self.horizon_decisions is None:
            return episode_score(copied, copy.deepcopy(router))
        return horizon_score(copied, copy.deepcopy(router), self.horizon_decisions)
