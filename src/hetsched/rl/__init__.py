"""Shared RL: one readable PPO with masks, factored heads and ε-mixed exploration.

Used by the Slim Scheduler router (``hetsched.slim.routers.ppo``) and the RLTune prioritiser.
"""

from hetsched.rl.advantages import compute_gae, one_step_advantages
from hetsched.rl.distributions import FactoredCategorical, MaskedCategorical
from hetsched.rl.networks import ActionAndValue, ActorCritic, FactoredActorCritic
from hetsched.rl.ppo import (
    PPOConfig,
    RolloutBatch,
    TrainResult,
    action_head_sizes,
    epsilon_at,
    ppo_update,
    to_env_action,
    train,
)

__all__ = [
    "ActionAndValue",
    "ActorCritic",
    "FactoredActorCritic",
    "FactoredCategorical",
    "MaskedCategorical",
    "PPOConfig",
    "RolloutBatch",
    "TrainResult",
    "action_head_sizes",
    "compute_gae",
    "epsilon_at",
    "one_step_advantages",
    "ppo_update",
    "to_env_action",
    "train",
]
