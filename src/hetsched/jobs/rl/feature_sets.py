"""The observations a queue-scoring agent can be built on, by name.

RLTune's agent and RLScheduler's kernel are the same mechanism (one small MLP shared by every
visible job gives it a logit; a masked softmax picks the job to start) on different observations
and network sizes. A :class:`FeatureSet` bundles what differs, so the agent, the decision policy of
training and the evaluation policy take one name and stay one piece of code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hetsched.core.errors import UnknownNameError
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.features import (
    CRITIC_FEATURES,
    MAX_QUEUE_SIZE,
    OBS_FEATURES,
    QueueFeatures,
    build_features,
)
from hetsched.jobs.rl.rlscheduler_features import (
    RLSCHEDULER_FEATURES,
    RLSCHEDULER_QUEUE,
    build_rlscheduler_features,
)


@dataclass(frozen=True)
class FeatureSet:
    """One observation and the network sizes its paper uses.

    Attributes:
        name: ``rltune`` or ``rlscheduler``.
        build: ``(state, max_queue)`` -> the window's features (observation, critic, masks).
        job_features: Observation features per job (the shared scorer's input width).
        critic_features: Critic features per job (the critic reads ``max_queue`` of them).
        max_queue: Default window of visible jobs.
        actor_hidden: Default hidden widths of the shared scorer.
        critic_hidden: Default hidden widths of the critic.
    """

    name: str
    build: Callable[[QueueState, int], QueueFeatures]
    job_features: int
    critic_features: int
    max_queue: int
    actor_hidden: tuple[int, ...]
    critic_hidden: tuple[int, ...]


FEATURE_SETS: dict[str, FeatureSet] = {
    # RLTune section 3.2 / Fig. 9: 8 sampled Table 3 features, critic over 5 per job.
    "rltune": FeatureSet(
        "rltune", build_features, OBS_FEATURES, CRITIC_FEATURES, MAX_QUEUE_SIZE, (32, 16), (64, 32)
    ),
    # RLScheduler section 4.2-4.3: 4 features, kernel 32-16-8, value network 64-32-8.
    "rlscheduler": FeatureSet(
        "rlscheduler",
        build_rlscheduler_features,
        len(RLSCHEDULER_FEATURES),
        len(RLSCHEDULER_FEATURES),
        RLSCHEDULER_QUEUE,
        (32, 16, 8),
        (64, 32, 8),
    ),
}


def get_feature_set(name: str) -> FeatureSet:
    """The feature set called ``name``.

    Raises:
        UnknownNameError: Listing the known names.
    """
    if name not in FEATURE_SETS:
        raise UnknownNameError(f"unknown feature set {name!r}; known: {', '.join(FEATURE_SETS)}")
    return FEATURE_SETS[name]
