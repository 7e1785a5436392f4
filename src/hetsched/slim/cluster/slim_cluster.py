"""The multi-server Slim cluster: global FIFO → router → per-server greedy executors → FIFO.

The request lifecycle of the Slim Scheduler (section III; ARCHITECTURE.md "Request lifecycle"):

1. An image enters the router's global FIFO, needing segment 0.
2. When the router is free and the FIFO is not empty, the router sees a :class:`RouterState` and
   returns (server, width, g); up to g head requests leave the FIFO as one *block* for that server.
3. A request whose activation lives elsewhere first crosses the link (bytes / bandwidth + latency);
   then the server's greedy executor (Algorithm 1) batches and runs it.
4. When the segment finishes, the request returns to the FIFO tail with w_prev = the width the
   executor actually ran; after the last segment the image is complete.
5. When every request of a block has finished, the block's outcome (accuracy signal, latency, mean
   power, utilisations: eq. 7's inputs) is recorded for the reward.

The cluster is mechanism only: it never decides. It can be driven by a router
(:meth:`SlimCluster.run`) or step by step (:meth:`SlimCluster.next_state` then
:meth:`SlimCluster.route`), which is how the Gymnasium environment trains a router. Time comes from
the clock the servers share: the simulated :class:`~hetsched.core.events.EventLoop`, or the wall
clock of the live backend (:class:`~hetsched.core.realtime.RealTimeLoop`). On live servers each
image carries its activation (``ImageRequest.payload``: the test image at arrival, then each
segment's output), and the final output's argmax decides correctness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

from hetsched.slim.cluster.accuracy_oracle import AccuracyOracle
from hetsched.slim.cluster.bookkeeping import ClusterBookkeeping
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.cluster.config import ClusterConfig, EventClock, TransferTime
from hetsched.slim.cluster.records import Block, ImageRequest
from hetsched.slim.executor.server import SegmentServer
from hetsched.slim.routers.base import (
    Prediction,
    Router,
    RouterState,
    RoutingDecision,
    ServerView,
)

__all__ = ["ClusterConfig", "SlimCluster"]

_HeadPlace = tuple[int, float | None, int | None]
"""(segment, previous width, location) of the FIFO head: what its predictions depend on."""
_ServerPredictors = (
    tuple[Callable[[], Prediction], Callable[[int], tuple[float, ...]]] | tuple[None, None]
)
"""A server's (lone prediction, block prediction) callables; None without a cost model."""
_Predictors = tuple[_ServerPredictors, ...]


class SlimCluster(ClusterBookkeeping):
    """Global FIFO, routing mechanism, transfers and bookkeeping for N servers.

    The arguments are :class:`ClusterBookkeeping`'s; this half adds the router's state,
    routing and activation transfers.
    """

    def __init__(
        self,
        servers: Sequence[SegmentServer],
        clock: EventClock,
        transfer_time: TransferTime,
        accuracy: AccuracyOracle,
        config: ClusterConfig | None = None,
        completion: CompletionModel | None = None,
    ) -> None:
        super().__init__(servers, clock, transfer_time, accuracy, config, completion)
        self._router_free_s = 0.0
        self._wake_pending = False
        self._predictors: dict[_HeadPlace, _Predictors] = {}
        """Per place of the head request, each server's prediction callables (see
        :meth:`_new_predictors`)."""
        self._no_backlogs = [0.0] * len(self.servers)

    # -- the decision point ---------------------------------------------------------------------

    def state(self) -> RouterState:
        """The read-only snapshot the router decides on (Slim eq. 1, the head request's deadline
        and place, per-server backlogs and lazily predicted completion times, the action sets)."""
        now_s = self.clock.now_s()
        fifo = self.fifo
        if fifo:
            head = fifo[0]
            segment, done_widths, location = head.segment, head.widths, head.location
            prev_width = done_widths[-1] if done_widths else None
            deadline_s = head.deadline_s
        else:
            segment, prev_width, location, deadline_s = 0, None, None, math.inf
        place = (segment, prev_width, location)
        predictors = self._predictors.get(place)
        if predictors is None:
            predictors = self._predictors[place] = self._new_predictors(place)
        in_transit, available = self._in_transit, self.available
        completion = self.completion
        backlogs = completion.backlog_s if completion is not None else self._no_backlogs
        views = []
        for index, server in enumerate(self.servers):
            telemetry = server.telemetry()
            views.append(
                ServerView(
                    server.name,
                    telemetry.queue_length + in_transit[index],
                    telemetry.power_w,
                    telemetry.max_power_w,
                    telemetry.utilization_pct,
                    available[index],
                    backlogs[index],
                    predict=predictors[index][0],
                    predict_block=predictors[index][1],
                )
            )
        config = self.config
        return RouterState(
            now_s,
            len(fifo),
            len(self.completed),
            self.arrived,
            segment,
            tuple(views),
            config.widths,
            config.group_sizes,
            deadline_s,
            deadline_s - now_s,
            location,
            prev_width,
        )

    def _new_predictors(self, place: _HeadPlace) -> _Predictors:
        """Per server, what a view calls for the predictions of a head request at ``place``.

        Kept per place (at most segments x widths x locations of them) rather than built per
        decision: a prediction reads the backlog and the link when the router asks for it.
        """
        completion = self.completion
        if completion is None:
            return ((None, None),) * len(self.servers)
        widths = self.config.widths
        return tuple(
            (
                partial(completion.predict, index, *place, widths),
                partial(completion.predict_block, index, *place, widths),
            )
            for index in range(len(self.servers))
        )

    def next_state(self) -> RouterState | None:
        """Advances time until the router has a head block to place; None when nothing is left.

        It stops as soon as the last scheduled image completes, so the clock reads the makespan
        (servers may still hold timers, e.g. an executor's idle-unload timer).
        """
        return self.state() if self._advance() else None

    def _advance(self) -> bool:
        """Runs events until the FIFO has a head and the router is free (True), or every
        scheduled image completed or no event is left (False)."""
        fifo, completed, clock = self.fifo, self.completed, self.clock
        now_s, step = clock.now_s, clock.step
        while True:
            if fifo:
                if now_s() >= self._router_free_s:
                    return True
                if not self._wake_pending:
                    # the router is still busy with its last decision: wake when it is free (only
                    # now, not at every decision: mostly the FIFO is empty until after that moment)
                    self._wake_pending = True
                    clock.schedule(self._router_free_s, self._wake)
            expected = self.expected_images
            if expected is not None and len(completed) >= expected:
                return False
            if not step():
                return False

    def route(self, decision: RoutingDecision) -> int:
        """Applies ``decision`` to the FIFO head; returns the decision id of the block.

        Raises:
            ValueError: If the FIFO is empty or the decision names no valid server/width/group.
        """
        fifo = self.fifo
        if not fifo:
            raise ValueError("route() called with an empty global FIFO")
        server, width, group_size = decision.server, decision.width, decision.group_size
        if not 0 <= server < len(self.servers):
            raise ValueError(f"server {server} out of range 0..{len(self.servers) - 1}")
        requested = self.requested_widths  # keyed by W: the valid widths
        if width not in requested or group_size < 1:
            raise ValueError(f"invalid width/group in {decision}")
        decision_id = self._next_decision
        self._next_decision = decision_id + 1
        waiting = len(fifo)
        count = group_size if group_size < waiting else waiting
        requested[width] += count
        requests = [fifo.popleft()] if count == 1 else [fifo.popleft() for _ in range(count)]
        self._dispatch(Block(decision_id, count, count), requests, server, width)
        self._router_free_s = self.clock.now_s() + self.config.decision_time_s
        return decision_id

    def run(self, router: Router) -> None:
        """Routes with ``router`` until every scheduled image completed."""
        decide, route, state, advance = router.decide, self.route, self.state, self._advance
        while advance():
            route(decide(state()))

    # -- mechanism ------------------------------------------------------------------------------

    def _dispatch(
        self, block: Block, requests: list[ImageRequest], server: int, width: float
    ) -> None:
        """Books each request on ``server`` and starts its transfer; requests already there (and
        those whose transfers end at the same moment) reach the server together, in order."""
        completion, transfer_time = self.completion, self.transfer_time
        local: list[ImageRequest] = []
        moving: dict[float, list[ImageRequest]] = {}
        for request in requests:
            done_widths = request.widths
            prev_width = done_widths[-1] if done_widths else None
            request.block = block
            request.server = server
            if completion is not None:
                request.booked_s = completion.book(server, request.segment, width, prev_width)
            location = request.location
            if location == server:
                local.append(request)
                continue
            delay_s = transfer_time(request.segment, prev_width, location, server)
            if delay_s > 0:
                group = moving.get(delay_s)
                if group is None:
                    moving[delay_s] = [request]
                else:
                    group.append(request)
            else:
                local.append(request)
        self._in_transit[server] += len(requests)
        if local:
            self._submit(server, width, local)
        for delay_s, group in moving.items():
            self.clock.schedule_in(delay_s, partial(self._submit, server, width, group))

    def _submit(self, server: int, width: float, requests: list[ImageRequest]) -> None:
        """Hands arrived requests to the server: runs of one key together (simulation), or one
        by one with their activations (live)."""
        self._in_transit[server] -= len(requests)
        target = self.servers[server]
        first = requests[0]
        if first.payload is not None:
            for request in requests:
                target.submit(
                    request.segment,
                    width,
                    request.widths[-1] if request.widths else None,
                    partial(self._output_done, request),
                    payload=request.payload,
                )
            return
        if len(requests) == 1:  # the usual case below saturation
            done_widths = first.widths
            prev_width = done_widths[-1] if done_widths else None
            target.submit_many(first.segment, width, prev_width, requests, self._finished)
            return
        start = 0
        while start < len(requests):
            first = requests[start]
            segment, done_widths = first.segment, first.widths
            prev_width = done_widths[-1] if done_widths else None
            end = start + 1
            while (
                end < len(requests)
                and requests[end].segment == segment
                and ((requests[end].widths[-1] if requests[end].widths else None) == prev_width)
            ):
                end += 1
            target.submit_many(segment, width, prev_width, requests[start:end], self._finished)
            start = end

    def _wake(self) -> None:
        """The router is free again (the event only moves the clock to that moment)."""
        self._wake_pending = False
