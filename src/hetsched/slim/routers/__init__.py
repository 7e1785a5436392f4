"""Slim Scheduler routers: the decision point, baselines and the PPO router (all in ROUTERS), and
the reward they are trained for (eq. 7)."""

from hetsched.slim.routers import baselines, ppo, queue_rules, slo_rules
from hetsched.slim.routers.base import (
    ROUTERS,
    Router,
    RouterState,
    RoutingDecision,
    ServerView,
    available_servers,
)

__all__ = [
    "ROUTERS",
    "Router",
    "RouterState",
    "RoutingDecision",
    "ServerView",
    "available_servers",
    "baselines",
    "ppo",
    "queue_rules",
    "slo_rules",
]
