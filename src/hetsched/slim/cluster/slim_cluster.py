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
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hetsched.slim.cluster.accuracy_oracle import AccuracyOracle, OutputAccuracyOracle
from hetsched.slim.cluster.completion_model import NO_PREDICTION, CompletionModel
from hetsched.slim.executor.server import SegmentServer
from hetsched.slim.routers.base import Router, RouterState, RoutingDecision, ServerView
from hetsched.slim.routers.reward import BlockOutcome, utilization_variance


class EventClock(Protocol):
    """The clock the cluster runs on: ``now_s`` plus scheduling and stepping (EventLoop-like)."""

    def now_s(self) -> float: ...

    def schedule_in(
        self, delay_s: float, callback: Callable[[], None], priority: int = 0
    ) -> object: ...

    def step(self) -> bool: ...


@dataclass
class ImageRequest:
    """One image moving through the segments."""

    image_id: int
    arrival_s: float
    fifo_enter_s: float
    """When it (re-)entered the global FIFO for its current segment."""
    deadline_s: float = math.inf
    """When the image must be complete to meet its SLO (arrival + the cluster's ``slo_s``)."""
    segment: int = 0
    widths: list[float] = field(default_factory=list)
    """Widths actually executed so far (w_prev is the last one)."""
    location: int | None = None
    """Server holding its activation (None: still at the router's host)."""
    energy_j: float = 0.0
    """Σ over its segments of P̄ · L (eq. 7's E), so an image's energy ≈ mean power × latency."""
    payload: Any = None
    """Its current activation when servers compute for real (the image, then each segment's
    output); None in simulation."""
    booked_s: float = 0.0
    """Backlog its current segment booked on its server (released when the segment is done)."""


@dataclass
class _Block:
    decision_id: int
    requests: list[ImageRequest]
    remaining: int
    accuracy_signals: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    images_completed: int = 0


@dataclass(frozen=True)
class CompletedImage:
    """One image that finished all segments."""

    image_id: int
    latency_s: float
    energy_j: float
    widths: tuple[float, ...]
    correct: bool
    finished_s: float = 0.0
    """When its last segment finished (cluster clock)."""
    deadline_s: float = math.inf
    """When it had to be finished to meet its SLO."""

    @property
    def met_slo(self) -> bool:
        """Finished by its deadline."""
        return self.finished_s <= self.deadline_s


@dataclass
class ClusterConfig:
    """Mechanism knobs of the cluster (the executors have their own)."""

    num_segments: int = 4
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    group_sizes: tuple[int, ...] = (1, 4, 8, 16)
    decision_time_s: float = 0.001
    """The router's own time per decision: it places one block per interval, so bursts queue in
    the global FIFO and the group size g matters."""
    slo_s: float = math.inf
    """Each image's deadline is its arrival plus this (its latency SLO)."""


TransferTime = Callable[[int, float | None, int | None, int], float]
"""(segment, prev_width, from_server, to_server) -> seconds to move the request's input."""


class SlimCluster:
    """Global FIFO, routing mechanism, transfers and bookkeeping for N servers.

    Args:
        servers: One :class:`SegmentServer` per server, in router index order.
        clock: The clock they share.
        transfer_time: Link model for moving activations between hosts.
        accuracy: Accuracy prior and per-image correctness; an :class:`OutputAccuracyOracle`
            judges images that carry payloads by their last segment's output.
        config: Mechanism knobs.
        completion: Cost model for the router's predicted completion times and backlogs (None:
            the state carries no predictions).
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
        self.servers = list(servers)
        self.completion = completion
        self.available = [True] * len(self.servers)
        """Per server: whether the router may choose it (a failed server is marked False)."""
        self.clock = clock
        self.transfer_time = transfer_time
        self.accuracy = accuracy
        self.config = config or ClusterConfig()
        self.fifo: deque[ImageRequest] = deque()
        self.completed: list[CompletedImage] = []
        self.block_outcomes: list[tuple[int, BlockOutcome]] = []
        """(decision_id, outcome) of finished blocks, in completion order (consumers may drain)."""
        self.utilization_variances: list[float] = []
        """Var(U/100) across servers sampled at every segment completion (Tables III-V)."""
        self.arrived = 0
        self.expected_images: int | None = None
        self._in_transit = [0] * len(self.servers)
        self._router_free_s = 0.0
        self._next_decision = 0
        self._output_accuracy = accuracy if isinstance(accuracy, OutputAccuracyOracle) else None
        self._image_payload: Callable[[int], Any] | None = None
        self._closers: list[Callable[[], None]] = []

    # -- arrivals -------------------------------------------------------------------------------

    def schedule_arrivals(
        self,
        arrival_times_s: Sequence[float],
        image_payload: Callable[[int], Any] | None = None,
    ) -> None:
        """Schedules one image arrival per time (absolute seconds on the cluster clock).

        Args:
            arrival_times_s: When each image arrives.
            image_payload: For live servers, image id -> the image tensor it carries from its
                arrival on; None in simulation (no payloads, correctness from the table).
        """
        self._image_payload = image_payload
        now = self.clock.now_s()
        self.expected_images = (self.expected_images or 0) + len(arrival_times_s)
        for at_s in arrival_times_s:
            self.clock.schedule_in(max(0.0, at_s - now), self._arrive)

    def _arrive(self) -> None:
        now = self.clock.now_s()
        image_id = self.arrived
        payload = None if self._image_payload is None else self._image_payload(image_id)
        self.fifo.append(ImageRequest(image_id, now, now, now + self.config.slo_s, payload=payload))
        self.arrived += 1

    # -- the decision point ---------------------------------------------------------------------

    def state(self) -> RouterState:
        """The read-only snapshot the router decides on (Slim eq. 1, the head request's deadline
        and place, per-server backlogs and predicted completion times, the action sets)."""
        now_s = self.clock.now_s()
        head = self.fifo[0] if self.fifo else None
        segment = head.segment if head is not None else 0
        prev_width = head.widths[-1] if head is not None and head.widths else None
        location = head.location if head is not None else None
        completion = self.completion
        widths = self.config.widths
        views = []
        for index, server in enumerate(self.servers):
            telemetry = server.telemetry()
            prediction = NO_PREDICTION
            if completion is not None:
                prediction = completion.predict(index, segment, prev_width, location, widths)
            transfer_s, backlog_s, segment_done, image_done = prediction
            views.append(
                ServerView(
                    server.name,
                    telemetry.queue_length + self._in_transit[index],
                    telemetry.power_w,
                    telemetry.max_power_w,
                    telemetry.utilization_pct,
                    self.available[index],
                    backlog_s,
                    transfer_s,
                    segment_done,
                    image_done,
                )
            )
        deadline_s = head.deadline_s if head is not None else math.inf
        return RouterState(
            now_s=now_s,
            fifo_length=len(self.fifo),
            completed=len(self.completed),
            arrived=self.arrived,
            head_segment=segment,
            servers=tuple(views),
            widths=widths,
            group_sizes=self.config.group_sizes,
            head_deadline_s=deadline_s,
            head_slack_s=deadline_s - now_s,
            head_location=location,
            head_prev_width=prev_width,
        )

    def next_state(self) -> RouterState | None:
        """Advances time until the router has a head block to place; None when nothing is left.

        It stops as soon as the last scheduled image completes, so the clock reads the makespan
        (servers may still hold timers, e.g. an executor's idle-unload timer).
        """
        while not (self.fifo and self.clock.now_s() >= self._router_free_s):
            if self.done or not self.clock.step():
                return None
        return self.state()

    def route(self, decision: RoutingDecision) -> int:
        """Applies ``decision`` to the FIFO head; returns the decision id of the block.

        Raises:
            ValueError: If the FIFO is empty or the decision names no valid server/width/group.
        """
        if not self.fifo:
            raise ValueError("route() called with an empty global FIFO")
        if not 0 <= decision.server < len(self.servers):
            raise ValueError(f"server {decision.server} out of range 0..{len(self.servers) - 1}")
        if decision.width not in self.config.widths or decision.group_size < 1:
            raise ValueError(f"invalid width/group in {decision}")
        decision_id = self._next_decision
        self._next_decision += 1
        count = min(decision.group_size, len(self.fifo))
        block = _Block(decision_id, [self.fifo.popleft() for _ in range(count)], count)
        for request in block.requests:
            self._dispatch(block, request, decision.server, decision.width)
        self._router_free_s = self.clock.now_s() + self.config.decision_time_s
        if self.config.decision_time_s > 0:
            self.clock.schedule_in(self.config.decision_time_s, _wake)
        return decision_id

    def run(self, router: Router) -> None:
        """Routes with ``router`` until every scheduled image completed."""
        while (state := self.next_state()) is not None:
            self.route(router.decide(state))

    # -- mechanism ------------------------------------------------------------------------------

    def _dispatch(self, block: _Block, request: ImageRequest, server: int, width: float) -> None:
        prev_width = request.widths[-1] if request.widths else None
        delay_s = 0.0
        if self.completion is not None:
            request.booked_s = self.completion.book(server, request.segment, width, prev_width)
        if request.location != server:
            delay_s = self.transfer_time(request.segment, prev_width, request.location, server)

        def submit() -> None:
            self._in_transit[server] -= 1
            target = self.servers[server]
            if request.payload is None:
                target.submit(
                    request.segment,
                    width,
                    prev_width,
                    lambda width_run: self._segment_done(block, request, server, width_run),
                )
                return

            def output_done(executed_width: float, output: Any) -> None:
                request.payload = output
                self._segment_done(block, request, server, executed_width)

            target.submit(request.segment, width, prev_width, output_done, payload=request.payload)

        self._in_transit[server] += 1
        if delay_s > 0:
            self.clock.schedule_in(delay_s, submit)
        else:
            submit()

    def _segment_done(
        self, block: _Block, request: ImageRequest, server: int, executed_width: float
    ) -> None:
        now = self.clock.now_s()
        if self.completion is not None:
            self.completion.release(server, request.booked_s)
        request.widths.append(executed_width)
        request.location = server
        latency_s = now - request.fifo_enter_s
        telemetry = [s.telemetry() for s in self.servers]
        mean_power_w = float(np.mean([t.power_w for t in telemetry]))
        utilizations = tuple(t.utilization_pct for t in telemetry)
        self.utilization_variances.append(utilization_variance(utilizations))
        request.energy_j += mean_power_w * latency_s
        request.segment += 1
        if request.segment >= self.config.num_segments:
            output_accuracy = self._output_accuracy
            if output_accuracy is not None and request.payload is not None:
                # live: the class logits the last segment really computed
                correct = output_accuracy.correct_output(request.image_id, request.payload)
            else:
                correct = self.accuracy.correct(request.widths, request.image_id)
            block.accuracy_signals.append(1.0 if correct else 0.0)
            block.images_completed += 1
            self.completed.append(
                CompletedImage(
                    request.image_id,
                    now - request.arrival_s,
                    request.energy_j,
                    tuple(request.widths),
                    correct,
                    now,
                    request.deadline_s,
                )
            )
        else:
            block.accuracy_signals.append(self.accuracy.prior(request.widths))
            request.fifo_enter_s = now
            self.fifo.append(request)
        block.latency_s = max(block.latency_s, latency_s)
        block.remaining -= 1
        if block.remaining == 0:
            self.block_outcomes.append(
                (
                    block.decision_id,
                    BlockOutcome(
                        accuracy=float(np.mean(block.accuracy_signals)),
                        latency_s=block.latency_s,
                        mean_power_w=mean_power_w,
                        utilizations_pct=utilizations,
                        requests=len(block.requests),
                        images_completed=block.images_completed,
                    ),
                )
            )

    def set_available(self, server: int, available: bool) -> None:
        """Marks ``server`` (un)available to the router (a failed server, then its return)."""
        self.available[server] = available

    def on_close(self, release: Callable[[], None]) -> None:
        """Registers what :meth:`close` must release (a live backend's worker threads)."""
        self._closers.append(release)

    def close(self) -> None:
        """Releases what the servers hold; nothing to do for simulated servers."""
        while self._closers:
            self._closers.pop()()

    @property
    def decisions(self) -> int:
        """Routing decisions made so far."""
        return self._next_decision

    @property
    def done(self) -> bool:
        """Every scheduled image has completed."""
        return self.expected_images is not None and len(self.completed) >= self.expected_images


def _wake() -> None:
    """No-op event: it only moves the clock to the moment the router is free again."""
