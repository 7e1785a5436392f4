"""From policy scores to Slurm decisions: integer priorities and oversubscribe advice.

Priorities (section 3.1.2: "the RL agent updates job priorities, which are applied directly to
Slurm"). Scores have no common scale (seconds for FCFS, arbitrary for WFP3 or a network), so the
mapping uses ranks: the best-scored job gets ``top``, each next distinct score ``step`` less,
never below ``bottom``. Equal scores share a priority, leaving Slurm's tie-break (earlier
submission first) to order them, as the simulator does. With a fixed step, a job keeps its
priority while its rank does not change, so a scan only re-issues ``scontrol`` for jobs whose
rank moved.

Oversubscribe (section 3.1.2: "allocation flexibility is managed through Slurm's oversubscribe
flag as per the solver's guidance"; section 5.7: the solver runs only when several placements
exist). See :func:`placement_advice`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from hetsched.core.errors import ConfigError
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, Placer, candidate_placements

#: Slurm's largest settable priority (checked on 22.05: ``scontrol`` refuses 4294967294 and
#: 4294967295, Slurm's NO_VAL and INFINITE markers).
SLURM_MAX_PRIORITY = 4_294_967_293


@dataclass(frozen=True)
class PriorityRange:
    """Where in Slurm's priority range the adapter puts the jobs it manages.

    Attributes:
        top: Priority of the best-ranked job.
        step: Gap between consecutive ranks.
        bottom: Floor (>= 1: priority 0 means "held" in Slurm).
    """

    top: int = 1_000_000
    step: int = 100
    bottom: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.bottom <= self.top <= SLURM_MAX_PRIORITY:
            raise ConfigError(
                f"priority range needs 1 <= bottom ({self.bottom}) <= top ({self.top})"
                f" <= {SLURM_MAX_PRIORITY}"
            )
        if self.step < 1:
            raise ConfigError(f"priority step must be >= 1, got {self.step}")


def scores_to_priorities(scores: np.ndarray, priority_range: PriorityRange) -> np.ndarray:
    """Slurm priorities (int64) for policy ``scores`` (lower score = runs first).

    Dense ranks of the scores (NaN ranks last), then ``top - rank * step`` floored at ``bottom``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return np.zeros(0, dtype=np.int64)
    finite = np.where(np.isnan(scores), np.inf, scores)
    _, rank = np.unique(finite, return_inverse=True)
    priorities = priority_range.top - rank.astype(np.int64) * priority_range.step
    return np.maximum(priorities, priority_range.bottom)


class Advice(Enum):
    """What to tell Slurm about one job's node sharing."""

    EXCLUSIVE = "exclusive"  # OverSubscribe=NO: the job gets its nodes to itself (spread)
    SHARED = "shared"  # may share nodes with other jobs (pack)


def placement_advice(request: JobRequest, state: ClusterState, placer: Placer) -> Advice | None:
    """Whether the placer would isolate the job or pack it next to running jobs.

    Among the candidate placements (pack and spread on the fewest nodes and one more, the choice
    set of Algorithm 1) the placer picks one. If it puts the job only on idle nodes although a
    placement next to running jobs existed, it chose isolation: EXCLUSIVE. If it puts the job
    next to running jobs: SHARED. No advice (None) when fewer than two placements exist (the
    paper calls the solver only then) or the job does not fit now.
    """
    candidates = candidate_placements(request, state)
    if len(candidates) < 2:
        return None
    pick = placer.place(request, state)
    if pick is None:
        return None
    cluster = state.cluster
    idle = (state.free_gpus == cluster.node_gpus) & (state.free_cpus >= cluster.node_cpus)
    alone = bool(idle[pick.node_indices].all())
    if not alone:
        return Advice.SHARED
    could_pack = any(not idle[c.node_indices].all() for c in candidates)
    return Advice.EXCLUSIVE if could_pack else None
