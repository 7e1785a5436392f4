"""The knobs of one simulation: queue mode, placer, priority recomputation, unrunnable jobs.

Queue modes (what happens when the best-ranked waiting job does not fit):
- ``greedy`` (default, work-conserving): skip it and try the next job in priority order, so one
  large job never idles the cluster (RLTune's simulator let the chosen job block the queue);
- ``strict``: stop; nothing behind it starts until it does (the order is re-ranked at every
  pass, so a better-scored newcomer that fits may still go first);
- ``committed``: strict, and once a job is picked it stays picked until it starts, even if a
  better-scored job arrives (RLScheduler's "no backfilling" and RLTune's published behaviour,
  kept only to reproduce their numbers);
- ``easy``: EASY backfilling (Lifka 1995; paper section 4.1): reserve the earliest start for the
  blocked head job, then start later jobs only if they cannot delay that reservation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hetsched.core.errors import HetschedError
from hetsched.jobs.placement.placers import Placer

QueueMode = Literal["greedy", "strict", "committed", "easy"]
QUEUE_MODES: tuple[str, ...] = ("greedy", "strict", "committed", "easy")


class UnrunnableJobError(HetschedError):
    """A job can never run on the cluster (too many GPUs, an absent GPU type or VC)."""


@dataclass
class SimulationConfig:
    """Knobs of one simulation.

    Attributes:
        queue_mode: ``greedy``, ``strict`` or ``easy`` (see the module docstring).
        placer: Placer name (``pack`` or ``spread``) or an object with ``place``.
        recompute_interval_s: None = priorities recomputed at every pass; a number = recomputed
            only every that many seconds (Slurm's ``PriorityCalcPeriod``), new arrivals scored
            once on arrival.
        drop_unrunnable: Drop jobs that can never fit (reported in the result) instead of raising.
        max_passes: Safety limit on scheduling passes (None = unlimited).
        starts_per_pass: None = a pass starts every job that fits; a number = at most that many,
            then another pass runs at the same instant. A policy whose scores depend on the free
            resources (the RL prioritiser) asks for 1 through its own ``starts_per_pass``
            attribute, so it re-scores after every start.
    """

    queue_mode: QueueMode = "greedy"
    placer: str | Placer = "pack"
    recompute_interval_s: float | None = None
    drop_unrunnable: bool = False
    max_passes: int | None = None
    starts_per_pass: int | None = None
