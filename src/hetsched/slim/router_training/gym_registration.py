"""``gymnasium.make("hetsched/SlimRouting-v0")``: the router's environment for any RL library.

Importing :mod:`hetsched.slim.router_training` registers the id (or name the module in the id:
``gymnasium.make("hetsched.slim.router_training:hetsched/SlimRouting-v0")``). The environment is a
:class:`~hetsched.slim.router_training.env.SlimRoutingEnv` over the randomised training mix
(:mod:`~hetsched.slim.router_training.scenario_mix`) with the extended observation and the SLO
reward; keyword arguments of ``make`` choose otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.scenario_mix import mix_encoder, training_mix
from hetsched.slim.routers.reward import reward_weights
from hetsched.slim.routers.slo_features import DEFAULT_ADVISORS
from hetsched.slim.sim.scenario import mean_top1

ENV_ID = "hetsched/SlimRouting-v0"
"""The registered id."""


def make_routing_env(
    scenarios: Sequence[str] = (),
    images: int = 200,
    preset: str = "slo",
    randomize: bool = True,
    advisors: Sequence[str] = DEFAULT_ADVISORS,
) -> SlimRoutingEnv:
    """The environment of the id: episodes of ``images`` images drawn from the named scenarios
    (none named: every shipped one not held out), rewarded by the reward ``preset``."""
    mix = training_mix(scenarios, images, randomize)
    return SlimRoutingEnv(
        mix.cluster,
        mix_encoder(mix, advisors),
        reward_weights(preset),
        mean_top1(next(iter(mix.scenarios.values()))),
    )


def register_routing_env() -> None:
    """Registers :data:`ENV_ID` with gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=f"{__name__}:make_routing_env")
