"""The knobs of one simulation: queue mode, placer, priority recomputation, unrunnable jobs.

Queue modes (what happens when the best-ranked waiting job does not fit):
- ``greedy`` (default, work-conserving): skip it and try the next job in priority order, so one
  large job never idles the cluster (RLTune's simulator let the chosen job block the queue);
- ``strict``: stop; nothing behind it starts until it does (the order is re-ranked at every
  pass, so a better-scored newcomer that fits may still go first);
- ``committed``: strict, and the first job of a pass that could not start stays picked until it
  starts, even if a better-scored job arrives (RLScheduler's "no backfilling", which re-picks
  after every start and waits for the pick that does not fit; RLTune's published behaviour,
  kept to reproduce their numbers);
- ``easy``: EASY backfilling (Lifka 1995; paper section 4.1): reserve the earliest start for the
  blocked head job, then start later jobs only if they cannot delay that reservation;
- ``rlscheduler-backfill``: ``committed`` with RLScheduler's backfilling rule
  (the simulator module), which differs from EASY in four points: the shadow time
  is computed once per blocked head (not at every pass), candidates are scanned in submission
  order (not priority order), a candidate must end strictly before the shadow time (EASY: at or
  before), and there is no "extra nodes" rule (a job that would run past the shadow time never
  backfills, even on nodes the head does not need).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hetsched.core.errors import HetschedError
from hetsched.jobs.placement.placers import Placer

QueueMode = Literal["greedy", "strict", "committed", "easy", "rlscheduler-backfill"]
QUEUE_MODES: tuple[str, ...] = ("greedy", "strict", "committed", "easy", "rlscheduler-backfill")
#: ``--backfill-rule`` name -> the queue mode it runs.
BACKFILL_MODES: dict[str, str] = {"easy": "easy", "rlscheduler": "rlscheduler-backfill"}
#: The queue modes that keep a blocked pick first until it starts.
COMMITTED_MODES: frozenset[str] = frozenset({"committed", "rlscheduler-backfill"})


class UnrunnableJobError(HetschedError):
    """A job can never run on the cluster (too many GPUs, an absent GPU type or VC)."""


@dataclass
class SimulationConfig:
    """Knobs of one simulation.

    Attributes:
        queue_mode: ``greedy``, ``strict``, ``committed``, ``easy`` or ``rlscheduler-backfill``
            (see the module docstring).
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
