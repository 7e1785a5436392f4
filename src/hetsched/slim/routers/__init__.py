"""Slim Scheduler routers: the decision point, baselines and the PPO router (all in ROUTERS)."""

from hetsched.slim.routers import baselines, ppo
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
]
