"""Trained agents as priority policies, and policies by name or checkpoint path.

:class:`RLPriorityPolicy` plugs a queue-scoring agent (RLTune's or RLScheduler's) into the
simulator (or the Slurm adapter) as an ordinary :class:`~hetsched.jobs.policies.PriorityPolicy`;
a SchedInspector agent becomes an :class:`~hetsched.jobs.rl.inspector.InspectorPolicy` over its
base policy (its holds need the simulator: a live Slurm queue only sees the base order).
:func:`policy_from_checkpoint` turns any checkpoint written by ``hetsched jobs train`` into its
policy, and :func:`policy_by_name` is the one place where a ``--policy`` value becomes a policy:
a registered heuristic's name, or a path ending in ``.pt`` for a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy, QueueState
from hetsched.jobs.rl.agent import JobScoringAgent, load_checkpoint
from hetsched.jobs.rl.feature_sets import get_feature_set
from hetsched.jobs.rl.features import choice_possible
from hetsched.jobs.rl.inspector import InspectorPolicy
from hetsched.jobs.rl.inspector_agent import InspectorAgent

CHECKPOINT_SUFFIX = ".pt"


class RLPriorityPolicy:
    """A trained queue scorer as a :class:`~hetsched.jobs.policies.PriorityPolicy` (lower first).

    Visible jobs (the ``max_queue`` oldest) are ranked by the actor's logits; older jobs beyond the
    window come after them in submission order. ``starts_per_pass = 1`` makes the simulator
    re-score after every start, because the features (free GPUs, ``can_schedule_now``, ...) change
    with each one, which is also how the agent acted in training.

    Args:
        agent: The actor-critic (its feature set says which observation it reads).
        name: Label in tables.
    """

    starts_per_pass = 1

    def __init__(self, agent: JobScoringAgent, name: str = "rltune") -> None:
        self.agent = agent
        self.name = name
        self.build = get_feature_set(agent.feature_set).build

    def score(self, state: QueueState) -> np.ndarray:
        """Negated logits for the visible jobs, +inf (submission order) for the rest; submission
        order when at most one job can start (as in training, the order matters only then)."""
        if not choice_possible(state, self.agent.max_queue):
            return np.arange(len(state.queue), dtype=np.float64)
        scores = np.full(len(state.queue), np.inf)
        features = self.build(state, self.agent.max_queue)
        visible = len(features.queue)
        # Jobs that cannot start now go last, so the simulator does not try to place them first.
        ranked = np.where(features.can_start[:visible], -self.agent.priorities(features), np.inf)
        scores[:visible] = ranked
        return scores


def agent_label(kind: str, meta: dict[str, Any]) -> str:
    """A checkpoint's name in tables: ``RL-<base>`` for RLTune's agent (trained against that base
    policy), ``RLScheduler`` (its reward has no base policy), ``SchedInspector-<base>`` (the base
    policy it inspects)."""
    base = meta.get("base_policy", "unknown")
    if kind == "rlscheduler":
        return "RLScheduler"
    if kind == InspectorAgent.KIND:
        return f"SchedInspector-{base}"
    return f"RL-{base}"


@dataclass
class LoadedPolicy:
    """A checkpoint's policy with what tables say about it.

    Attributes:
        policy: The priority policy (named ``label``).
        kind: The agent kind (``rltune``, ``rlscheduler``, ``schedinspector``).
        meta: The training metadata (base policy, metric, seed, ...).
    """

    policy: PriorityPolicy
    kind: str
    meta: dict[str, Any]


def policy_from_checkpoint(path: str | Path, name: str | None = None) -> LoadedPolicy:
    """The policy of the agent saved at ``path``, named ``name`` or :func:`agent_label`'s: a
    queue scorer ranks the queue, an inspector holds passes of the base policy it was trained on.

    Raises:
        DataError: For a missing or unreadable checkpoint.
    """
    agent, meta = load_checkpoint(path)
    label = name or agent_label(agent.kind, meta)
    policy: PriorityPolicy
    if isinstance(agent, InspectorAgent):
        base = make_policy(str(meta.get("base_policy", "fcfs")))
        policy = InspectorPolicy(base, agent.decide, agent.max_queue, agent.max_rejections, label)
    else:
        policy = RLPriorityPolicy(agent, label)
    return LoadedPolicy(policy, agent.kind, meta)


def policy_by_name(name: str, **options: object) -> PriorityPolicy:
    """The policy registered as ``name`` with ``options`` (unknown names list the known ones), or
    the policy of the checkpoint at ``name`` when it ends in ``.pt`` (its label then comes from
    the checkpoint; ``options`` are for registered policies only).

    Raises:
        UnknownNameError: For an unknown policy name.
        DataError: For a missing or unreadable checkpoint.
    """
    if name.endswith(CHECKPOINT_SUFFIX):
        return policy_from_checkpoint(name).policy
    return make_policy(name, **options)
