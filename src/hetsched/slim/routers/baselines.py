"""Baseline routers: the paper's uniform random routing (Table III) and classic heuristics.

Each baseline fixes one idea and draws the remaining choices uniformly, so that comparing them with
``random`` isolates that idea: ``round-robin`` and ``least-loaded`` change only how the server is
picked; ``static-widest`` / ``static-slimmest`` pick the least-loaded server and fix the width.
"""

from __future__ import annotations

from hetsched.core.seeding import make_rng
from hetsched.slim.routers.base import (
    ROUTERS,
    Router,
    RouterState,
    RoutingDecision,
    available_servers,
)


class _SeededRouter(Router):
    """Shared by the baselines: a seeded generator for the choices they leave to chance."""

    def __init__(self, seed: int = 0, group_size: int | None = None) -> None:
        self._rng = make_rng(seed)
        self.group_size = group_size

    def _random_width(self, state: RouterState) -> float:
        return state.widths[int(self._rng.integers(len(state.widths)))]

    def _group(self, state: RouterState) -> int:
        if self.group_size is not None:
            return self.group_size
        return state.group_sizes[int(self._rng.integers(len(state.group_sizes)))]


@ROUTERS.register("random")
class RandomRouter(_SeededRouter):
    """Uniformly random server, width and group size: the paper's Table III baseline."""

    def decide(self, state: RouterState) -> RoutingDecision:
        servers = available_servers(state)
        server = servers[int(self._rng.integers(len(servers)))]
        return RoutingDecision(server, self._random_width(state), self._group(state))


@ROUTERS.register("round-robin")
class RoundRobinRouter(_SeededRouter):
    """Servers in turn (skipping unavailable ones); width and group size uniformly random."""

    def __init__(self, seed: int = 0, group_size: int | None = None) -> None:
        super().__init__(seed, group_size)
        self._next = 0

    def decide(self, state: RouterState) -> RoutingDecision:
        servers = available_servers(state)
        server = servers[self._next % len(servers)]
        self._next += 1
        return RoutingDecision(server, self._random_width(state), self._group(state))


def least_loaded_server(state: RouterState) -> int:
    """Join-the-shortest-queue: fewest queued requests, then lowest utilisation, then index."""
    return min(
        available_servers(state),
        key=lambda i: (state.servers[i].queue_length, state.servers[i].utilization_pct, i),
    )


@ROUTERS.register("least-loaded")
class LeastLoadedRouter(_SeededRouter):
    """Join-the-shortest-queue server; width and group size uniformly random."""

    def decide(self, state: RouterState) -> RoutingDecision:
        return RoutingDecision(
            least_loaded_server(state), self._random_width(state), self._group(state)
        )


@ROUTERS.register("static-widest")
class StaticWidestRouter(_SeededRouter):
    """Always the widest model (best accuracy) on the least-loaded server."""

    def decide(self, state: RouterState) -> RoutingDecision:
        return RoutingDecision(least_loaded_server(state), max(state.widths), self._group(state))


@ROUTERS.register("static-slimmest")
class StaticSlimmestRouter(_SeededRouter):
    """Always the slimmest model (cheapest) on the least-loaded server."""

    def decide(self, state: RouterState) -> RoutingDecision:
        return RoutingDecision(least_loaded_server(state), min(state.widths), self._group(state))
