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
from functools import partial
from typing import Any

from hetsched.slim.cluster.accuracy_oracle import AccuracyOracle, OutputAccuracyOracle
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.cluster.config import ClusterConfig, EventClock, TransferTime
from hetsched.slim.cluster.records import Block, CompletedImage, ImageRequest
from hetsched.slim.executor.server import SegmentServer, ServerTelemetry
from hetsched.slim.routers.base import Router, RouterState, RoutingDecision, ServerView
from hetsched.slim.routers.reward import BlockOutcome


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
        self.clock = clock
        self.transfer_time = transfer_time
        self.accuracy = accuracy
        self.config = config = config or ClusterConfig()
        self.completion = completion
        self.available = [True] * len(self.servers)
        """Per server: whether the router may choose it (a failed server is marked False)."""
        self.fifo: deque[ImageRequest] = deque()
        self.completed: list[CompletedImage] = []
        self.block_outcomes: list[tuple[int, BlockOutcome]] = []
        """(decision_id, outcome) of finished blocks, in completion order (consumers may drain)."""
        self.utilization_variances: list[float] = []
        """Var(U/100) across servers sampled at every segment completion (Tables III-V)."""
        self.arrived = 0
        self.expected_images: int | None = None
        self.requested_widths: dict[float, int] = dict.fromkeys(config.widths, 0)
        """Segment requests the router asked for at each width (beside what ran: the widths of
        :attr:`completed` images; FINDFREEBESTFIT may run a request wider)."""
        self._arrival_times_s: list[float] = []
        self._arrival_offset = 0
        """Images admitted before :attr:`_arrival_times_s` was last rebuilt."""
        self._in_transit = [0] * len(self.servers)
        self._router_free_s = 0.0
        self._wake_pending = False
        self._next_decision = 0
        self._output_accuracy = accuracy if isinstance(accuracy, OutputAccuracyOracle) else None
        self._image_payload: Callable[[int], Any] | None = None
        self._closers: list[Callable[[], None]] = []
        self._finished = self._segments_done
        """One bound method for every submit_many: the executors report its batches at once."""

    # -- arrivals -------------------------------------------------------------------------------

    def schedule_arrivals(
        self,
        arrival_times_s: Sequence[float],
        image_payload: Callable[[int], Any] | None = None,
    ) -> None:
        """Schedules one image arrival per time (absolute seconds on the cluster clock).

        One arrival event is pending at a time (it admits every image due by then and schedules
        the next), so the event heap stays small however long the workload.

        Args:
            arrival_times_s: When each image arrives, in order.
            image_payload: For live servers, image id -> the image tensor it carries from its
                arrival on; None in simulation (no payloads, correctness from the table).
        """
        self._image_payload = image_payload
        self.expected_images = (self.expected_images or 0) + len(arrival_times_s)
        pending = self.arrived < len(self._arrival_times_s)
        waiting = self._arrival_times_s[self.arrived - self._arrival_offset :]
        self._arrival_times_s = sorted([*waiting, *arrival_times_s])
        self._arrival_offset = self.arrived
        if arrival_times_s and not pending:
            self._schedule_next_arrival()

    def _schedule_next_arrival(self) -> None:
        index = self.arrived - self._arrival_offset
        if index < len(self._arrival_times_s):
            at_s = self._arrival_times_s[index]
            now_s = self.clock.now_s()
            self.clock.schedule(at_s if at_s > now_s else now_s, self._arrive)

    def _arrive(self) -> None:
        now = self.clock.now_s()
        times, offset = self._arrival_times_s, self._arrival_offset
        slo_s, payload_of = self.config.slo_s, self._image_payload
        while self.arrived - offset < len(times) and times[self.arrived - offset] <= now:
            image_id = self.arrived
            payload = None if payload_of is None else payload_of(image_id)
            self.fifo.append(ImageRequest(image_id, now, now, now + slo_s, payload=payload))
            self.arrived += 1
        self._schedule_next_arrival()

    # -- the decision point ---------------------------------------------------------------------

    def state(self) -> RouterState:
        """The read-only snapshot the router decides on (Slim eq. 1, the head request's deadline
        and place, per-server backlogs and lazily predicted completion times, the action sets)."""
        now_s = self.clock.now_s()
        head = self.fifo[0] if self.fifo else None
        segment = head.segment if head is not None else 0
        prev_width = head.widths[-1] if head is not None and head.widths else None
        location = head.location if head is not None else None
        completion = self.completion
        widths = self.config.widths
        in_transit, available = self._in_transit, self.available
        backlogs = completion.backlog_s if completion is not None else [0.0] * len(self.servers)
        views = []
        for index, server in enumerate(self.servers):
            telemetry = server.telemetry()
            predict = None
            if completion is not None:
                predict = partial(completion.predict, index, segment, prev_width, location, widths)
            views.append(
                ServerView(
                    server.name,
                    telemetry.queue_length + in_transit[index],
                    telemetry.power_w,
                    telemetry.max_power_w,
                    telemetry.utilization_pct,
                    available[index],
                    backlogs[index],
                    predict=predict,
                )
            )
        deadline_s = head.deadline_s if head is not None else math.inf
        return RouterState(
            now_s,
            len(self.fifo),
            len(self.completed),
            self.arrived,
            segment,
            tuple(views),
            widths,
            self.config.group_sizes,
            deadline_s,
            deadline_s - now_s,
            location,
            prev_width,
        )

    def next_state(self) -> RouterState | None:
        """Advances time until the router has a head block to place; None when nothing is left.

        It stops as soon as the last scheduled image completes, so the clock reads the makespan
        (servers may still hold timers, e.g. an executor's idle-unload timer).
        """
        fifo, clock = self.fifo, self.clock
        while not (fifo and clock.now_s() >= self._router_free_s):
            if fifo and not self._wake_pending:
                # the router is still busy with its last decision: wake when it is free (only
                # now, not at every decision: mostly the FIFO is empty until after that moment)
                self._wake_pending = True
                clock.schedule(self._router_free_s, self._wake)
            if self.done or not clock.step():
                return None
        return self.state()

    def route(self, decision: RoutingDecision) -> int:
        """Applies ``decision`` to the FIFO head; returns the decision id of the block.

        Raises:
            ValueError: If the FIFO is empty or the decision names no valid server/width/group.
        """
        fifo = self.fifo
        if not fifo:
            raise ValueError("route() called with an empty global FIFO")
        server, width = decision.server, decision.width
        if not 0 <= server < len(self.servers):
            raise ValueError(f"server {server} out of range 0..{len(self.servers) - 1}")
        if width not in self.config.widths or decision.group_size < 1:
            raise ValueError(f"invalid width/group in {decision}")
        decision_id = self._next_decision
        self._next_decision += 1
        count = min(decision.group_size, len(fifo))
        self.requested_widths[width] += count
        block = Block(decision_id, count, count)
        requests = [fifo.popleft() for _ in range(count)]
        self._dispatch(block, requests, server, width)
        self._router_free_s = self.clock.now_s() + self.config.decision_time_s
        return decision_id

    def run(self, router: Router) -> None:
        """Routes with ``router`` until every scheduled image completed."""
        decide, route = router.decide, self.route
        while (state := self.next_state()) is not None:
            route(decide(state))

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
            prev_width = request.widths[-1] if request.widths else None
            request.block = block
            request.server = server
            if completion is not None:
                request.booked_s = completion.book(server, request.segment, width, prev_width)
            if request.location == server:
                local.append(request)
                continue
            delay_s = transfer_time(request.segment, prev_width, request.location, server)
            if delay_s > 0:
                moving.setdefault(delay_s, []).append(request)
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
        if requests[0].payload is not None:
            for request in requests:
                target.submit(
                    request.segment,
                    width,
                    request.widths[-1] if request.widths else None,
                    partial(self._output_done, request),
                    payload=request.payload,
                )
            return
        start = 0
        while start < len(requests):
            first = requests[start]
            segment, widths = first.segment, first.widths
            prev_width = widths[-1] if widths else None
            end = start + 1
            while (
                end < len(requests)
                and requests[end].segment == segment
                and ((requests[end].widths[-1] if requests[end].widths else None) == prev_width)
            ):
                end += 1
            target.submit_many(segment, width, prev_width, requests[start:end], self._finished)
            start = end

    def _output_done(self, request: ImageRequest, executed_width: float, output: Any) -> None:
        """A live segment finished with its real output, which the request carries on."""
        request.payload = output
        self._segments_done(executed_width, [request])

    def _segments_done(self, executed_width: float, requests: list[ImageRequest]) -> None:
        """Segment completions of one batch (one server, one time): record, requeue or finish.

        The servers' telemetry is read once: nothing changes it between the requests of a batch.
        """
        now = self.clock.now_s()
        server = requests[0].server
        completion = self.completion
        if completion is not None:
            for request in requests:
                completion.release(server, request.booked_s)
        power_w, utilizations, variance = servers_telemetry(self.servers)
        self.utilization_variances.extend([variance] * len(requests))
        num_segments, accuracy, fifo = self.config.num_segments, self.accuracy, self.fifo
        for request in requests:
            widths = request.widths
            widths.append(executed_width)
            request.location = server
            latency_s = now - request.fifo_enter_s
            request.energy_j += power_w * latency_s
            request.segment += 1
            block = request.block
            assert block is not None  # set when it was routed
            if request.segment >= num_segments:
                correct = self._image_correct(request)
                block.accuracy_signals.append(1.0 if correct else 0.0)
                block.images_completed += 1
                self.completed.append(
                    CompletedImage(
                        request.image_id,
                        now - request.arrival_s,
                        request.energy_j,
                        tuple(widths),
                        correct,
                        now,
                        request.deadline_s,
                        request.arrival_s,
                    )
                )
            else:
                block.accuracy_signals.append(accuracy.prior(widths))
                request.fifo_enter_s = now
                fifo.append(request)
            if latency_s > block.latency_s:
                block.latency_s = latency_s
            block.remaining -= 1
            if block.remaining == 0:
                self._block_finished(block, power_w, utilizations)

    def _image_correct(self, request: ImageRequest) -> bool:
        """Live: the class logits its last segment really computed; else the accuracy table."""
        if self._output_accuracy is not None and request.payload is not None:
            return self._output_accuracy.correct_output(request.image_id, request.payload)
        return self.accuracy.correct(request.widths, request.image_id)

    def _block_finished(
        self, block: Block, power_w: float, utilizations: tuple[float, ...]
    ) -> None:
        signals = block.accuracy_signals
        self.block_outcomes.append(
            (
                block.decision_id,
                BlockOutcome(
                    accuracy=sum(signals) / len(signals),
                    latency_s=block.latency_s,
                    mean_power_w=power_w,
                    utilizations_pct=utilizations,
                    requests=block.requests,
                    images_completed=block.images_completed,
                ),
            )
        )

    def _wake(self) -> None:
        """The router is free again (the event only moves the clock to that moment)."""
        self._wake_pending = False

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
    def arrival_times_s(self) -> list[float]:
        """Arrival times of the images of the last :meth:`schedule_arrivals` (with any still
        waiting from before it), in order: a whole workload's, when it was scheduled at once."""
        return list(self._arrival_times_s)

    @property
    def decisions(self) -> int:
        """Routing decisions made so far."""
        return self._next_decision

    @property
    def done(self) -> bool:
        """Every scheduled image has completed."""
        return self.expected_images is not None and len(self.completed) >= self.expected_images


def servers_telemetry(
    servers: Sequence[SegmentServer],
) -> tuple[float, tuple[float, ...], float]:
    """(mean power across servers, every server's utilisation, Var(U/100)) now.

    Written out rather than with NumPy (once per batch): the same sums in the same order as
    ``np.mean`` and ``np.var`` over so few servers, so the figures are bit-identical.
    """
    telemetry: list[ServerTelemetry] = [server.telemetry() for server in servers]
    count = len(telemetry)
    power_w = sum([t.power_w for t in telemetry]) / count
    utilizations = tuple([t.utilization_pct for t in telemetry])
    shares = [u / 100.0 for u in utilizations]
    mean = sum(shares) / count
    variance = sum([(x - mean) * (x - mean) for x in shares]) / count
    return power_w, utilizations, variance
