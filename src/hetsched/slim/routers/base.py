"""The router's decision point: a read-only state snapshot in, one routing decision out.

The cluster (mechanism) builds a :class:`RouterState` whenever the global FIFO has a head block to
place and applies the :class:`RoutingDecision` the router returns: up to ``group_size`` head
requests go to ``server`` for their next segment at ``width``. Every router — baselines and the PPO
router — has exactly this signature, so the cluster never asks which router it holds.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from hetsched.core.registry import Registry


@dataclass(frozen=True)
class ServerView:
    """Telemetry of one server as the router sees it (the per-server part of Slim eq. 1)."""

    name: str
    queue_length: int
    """q^(i): segment requests waiting in the server's executor FIFO or in transit to it."""
    power_w: float
    """P^(i): current board power."""
    max_power_w: float
    """Board power limit, to normalise P^(i)."""
    utilization_pct: float
    """U^(i): current compute utilisation, 0-100."""
    available: bool = True
    """False masks the server out of the routing choice (e.g. a device that is down)."""
    backlog_s: float = 0.0
    """Predicted seconds of device work already sent to the server and not finished (queued,
    running or in transit), from the device cost model: the queue delay a new request meets."""
    transfer_s: float = 0.0
    """Predicted seconds to move the head request's activation here (0 where it already lies)."""
    segment_done_s: tuple[float, ...] = ()
    """Per width of :attr:`RouterState.widths`: predicted seconds from now until the head
    request's next segment would finish here (transfer + backlog + its own service time).
    Empty when the cluster has no cost model (then nothing is predicted)."""
    image_done_s: tuple[float, ...] = ()
    """Per width of :attr:`RouterState.widths`: predicted seconds from now until the head
    request's image would be complete if all its remaining segments ran here at that width
    (compare with :attr:`RouterState.head_slack_s`). Empty without a cost model."""


@dataclass(frozen=True)
class RouterState:
    """What the router knows when it places the head block of the global FIFO.

    ``fifo_length`` and ``completed`` are the global part of Slim eq. (1); ``servers`` the
    per-server part. ``widths`` and ``group_sizes`` are the action sets (fixed per cluster).
    """

    now_s: float
    fifo_length: int
    """q^fifo: requests waiting in the router's global FIFO (the head block included)."""
    completed: int
    """c^done: images that finished all segments."""
    arrived: int
    """Images that entered the system so far (normalises ``completed``)."""
    head_segment: int
    """0-based segment the head request needs next."""
    servers: tuple[ServerView, ...]
    widths: tuple[float, ...]
    group_sizes: tuple[int, ...]
    head_deadline_s: float = math.inf
    """Absolute time (on the clock of ``now_s``) by which the head request's image must be
    complete to meet its SLO; infinite when the workload has no SLO."""
    head_slack_s: float = math.inf
    """``head_deadline_s - now_s``: time left for the head image's remaining segments (negative
    once it is late)."""
    head_location: int | None = None
    """Index of the server holding the head request's activation; None while it is still at the
    router's host (before its first segment). Routing it elsewhere costs a transfer."""
    head_prev_width: float | None = None
    """Width the head request's previous segment ran at (None before its first segment)."""


@dataclass(frozen=True)
class RoutingDecision:
    """Place up to ``group_size`` head requests on ``server`` (an index) at ``width``."""

    server: int
    width: float
    group_size: int


class Router(ABC):
    """A routing policy: ``decide(state) -> RoutingDecision``, nothing else."""

    @abstractmethod
    def decide(self, state: RouterState) -> RoutingDecision:
        """Chooses server, width and group size for the head block of ``state``."""


ROUTERS: Registry[type[Router]] = Registry("router")
"""Router classes by name: ``ROUTERS.create("random", seed=0)``."""


def available_servers(state: RouterState) -> list[int]:
    """Indices of the servers the router may choose (all of them when none is marked available)."""
    indices = [i for i, server in enumerate(state.servers) if server.available]
    return indices or list(range(len(state.servers)))
