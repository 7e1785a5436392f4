"""The trained actor as a priority policy, and policies by name or checkpoint path.

:class:`RLPriorityPolicy` plugs a checkpoint into the simulator (or the Slurm adapter) as an
ordinary :class:`~hetsched.jobs.policies.PriorityPolicy`. :func:`policy_by_name` is the one place
where a ``--policy`` value becomes a policy: a registered heuristic's name, or a path ending in
``.pt`` for a checkpoint written by ``hetsched jobs train``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy, QueueState
from hetsched.jobs.rl.agent import JobScoringAgent, load_checkpoint
from hetsched.jobs.rl.features import build_features, choice_possible

CHECKPOINT_SUFFIX = ".pt"


class RLPriorityPolicy:
    """The trained actor as a :class:`~hetsched.jobs.policies.PriorityPolicy` (lower score first).

    Visible jobs (the ``max_queue`` oldest) are ranked by the actor's logits; older jobs beyond the
    window come after them in submission order. ``starts_per_pass = 1`` makes the simulator
    re-score after every start, because the features (free GPUs, ``can_schedule_now``, ...) change
    with each one, which is also how the agent acted in training.

    Args:
        agent: The actor-critic.
        name: Label in tables.
    """

    starts_per_pass = 1

    def __init__(self, agent: JobScoringAgent, name: str = "rltune") -> None:
        self.agent = agent
        self.name = name

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path, name: str | None = None) -> RLPriorityPolicy:
        """Loads ``checkpoint``; the default name is ``RL-<base policy it was trained against>``."""
        agent, meta = load_checkpoint(checkpoint)
        return cls(agent, name or f"RL-{meta.get('base_policy', 'unknown')}")

    def score(self, state: QueueState) -> np.ndarray:
        """Negated logits for the visible jobs, +inf (submission order) for the rest; submission
        order when at most one job can start (as in training, the order matters only then)."""
        if not choice_possible(state, self.agent.max_queue):
            return np.arange(len(state.queue), dtype=np.float64)
        scores = np.full(len(state.queue), np.inf)
        features = build_features(state, self.agent.max_queue)
        visible = len(features.queue)
        # Jobs that cannot start now go last, so the simulator does not try to place them first.
        ranked = np.where(features.can_start[:visible], -self.agent.priorities(features), np.inf)
        scores[:visible] = ranked
        return scores


def policy_by_name(name: str, **options: object) -> PriorityPolicy:
    """The policy registered as ``name`` with ``options`` (unknown names list the known ones), or
    the RL policy of the checkpoint at ``name`` when it ends in ``.pt`` (its label then comes from
    the checkpoint; ``options`` are for registered policies only).

    Raises:
        UnknownNameError: For an unknown policy name.
        DataError: For a missing or unreadable checkpoint.
    """
    if name.endswith(CHECKPOINT_SUFFIX):
        return RLPriorityPolicy.from_checkpoint(name)
    return make_policy(name, **options)
