"""The router's decision point: a read-only state snapshot in, one routing decision out.

The cluster (mechanism) builds a :class:`RouterState` whenever the global FIFO has a head block to
place and applies the :class:`RoutingDecision` the router returns: up to ``group_size`` head
requests go to ``server`` for their next segment at ``width``. Every router — baselines and the PPO
router — has exactly this signature, so the cluster never asks which router it holds.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from hetsched.core.registry import Registry

Prediction = tuple[float, tuple[float, ...], tuple[float, ...]]
"""(transfer s, next segment done s per width, image done s per width) of the head request."""


class ServerView:
    """Telemetry of one server as the router sees it (the per-server part of Slim eq. 1), plus
    the cluster's predictions for the head request.

    A plain slotted class rather than a frozen dataclass: the cluster builds one per server per
    decision, and the simulator's speed (issue 19) cannot afford a frozen dataclass's
    construction. Treat it as read-only. The three predictions (``transfer_s``,
    ``segment_done_s``, ``image_done_s``) are given directly, or computed on first access by
    ``predict`` (so routers that never read them never pay for them).
    """

    __slots__ = (
        "_predict",
        "_predict_block",
        "_prediction",
        "available",
        "backlog_s",
        "max_power_w",
        "name",
        "power_w",
        "queue_length",
        "utilization_pct",
    )

    def __init__(
        self,
        name: str,
        queue_length: int,
        power_w: float,
        max_power_w: float,
        utilization_pct: float,
        available: bool = True,
        backlog_s: float = 0.0,
        transfer_s: float = 0.0,
        segment_done_s: tuple[float, ...] = (),
        image_done_s: tuple[float, ...] = (),
        *,
        predict: Callable[[], Prediction] | None = None,
        predict_block: Callable[[int], tuple[float, ...]] | None = None,
    ) -> None:
        self.name = name
        self.queue_length = queue_length
        """q^(i): segment requests waiting in the server's executor FIFO or in transit to it."""
        self.power_w = power_w
        """P^(i): current board power."""
        self.max_power_w = max_power_w
        """Board power limit, to normalise P^(i)."""
        self.utilization_pct = utilization_pct
        """U^(i): current compute utilisation, 0-100."""
        self.available = available
        """False masks the server out of the routing choice (e.g. a device that is down)."""
        self.backlog_s = backlog_s
        """Predicted seconds of device work already sent to the server and not finished (queued,
        running or in transit), from the device cost model: the queue delay a new request
        meets."""
        self._predict = predict
        self._predict_block = predict_block
        self._prediction: Prediction | None = (
            None if predict is not None else (transfer_s, segment_done_s, image_done_s)
        )

    def _predicted(self) -> Prediction:
        prediction = self._prediction
        if prediction is None:
            assert self._predict is not None  # set whenever no prediction was given
            prediction = self._prediction = self._predict()
        return prediction

    @property
    def transfer_s(self) -> float:
        """Predicted seconds to move the head request's activation here (0 where it lies)."""
        return self._predicted()[0]

    @property
    def segment_done_s(self) -> tuple[float, ...]:
        """Per width of :attr:`RouterState.widths`: predicted seconds from now until the head
        request's next segment would finish here (transfer + backlog + its own service time).
        Empty when the cluster has no cost model (then nothing is predicted)."""
        return self._predicted()[1]

    @property
    def image_done_s(self) -> tuple[float, ...]:
        """Per width of :attr:`RouterState.widths`: predicted seconds from now until the head
        request's image would be complete if all its remaining segments ran here at that width
        (compare with :attr:`RouterState.head_slack_s`). Empty without a cost model."""
        return self._predicted()[2]

    def block_image_done_s(self, requests: int) -> tuple[float, ...]:
        """Like :attr:`image_done_s`, but for the head request sent in a block of ``requests``
        that runs as one batch at every remaining segment: a rule that places a whole group
        waits for the group's batch, not for a lone request. On a device whose batch time grows
        with the batch (a CPU) the lone prediction is far too early: on ``bursty-3x`` it sent
        16-image blocks of width 0.75 to the CPU server, predicted to finish in 11 ms, and they
        took 60 (RESULTS, issue 19). Views built from given predictions (no cost model for
        blocks) answer the lone prediction."""
        if self._predict_block is None:
            return self.image_done_s
        return self._predict_block(requests)

    def __repr__(self) -> str:
        return (
            f"ServerView({self.name!r}, queue_length={self.queue_length},"
            f" power_w={self.power_w:g}, utilization_pct={self.utilization_pct:g},"
            f" available={self.available}, backlog_s={self.backlog_s:g})"
        )


@dataclass(slots=True)
class RouterState:
    """What the router knows when it places the head block of the global FIFO.

    ``fifo_length`` and ``completed`` are the global part of Slim eq. (1); ``servers`` the
    per-server part. ``widths`` and ``group_sizes`` are the action sets (fixed per cluster).
    A fresh snapshot per decision; treat it as read-only (not frozen only because a frozen
    dataclass costs the simulator more than the rest of a decision).
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
