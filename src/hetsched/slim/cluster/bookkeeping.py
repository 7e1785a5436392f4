"""The two ends of the Slim cluster's global FIFO: images arriving, segments coming back.

Steps 1, 4 and 5 of the request lifecycle (see :mod:`hetsched.slim.cluster.slim_cluster`, which
adds the decision point between them): an arriving image enters the FIFO needing segment 0; a
finished segment sends its request back to the FIFO tail (w_prev = the width the executor really
ran), or completes the image after the last segment; a block whose requests have all finished
their segment records its outcome (eq. 7's inputs) for the reward.

Everything here runs once per arrival or per finished batch of the simulator, the hot path of
issue 19's speed target, so the loops are written out with local names and no per-request
closures.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from hetsched.core.events import EventHandle
from hetsched.slim.cluster.accuracy_oracle import AccuracyOracle, OutputAccuracyOracle
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.cluster.config import ClusterConfig, EventClock, TransferTime
from hetsched.slim.cluster.records import Block, CompletedImage, ImageRequest
from hetsched.slim.executor.server import SegmentServer
from hetsched.slim.routers.reward import BlockOutcome


class ClusterBookkeeping:
    """The global FIFO, its arrivals and segment completions, and what the cluster records.

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
        self._arrival_event: EventHandle | None = None
        """The one pending arrival event (replaced when the future arrivals are)."""
        self._in_transit = [0] * len(self.servers)
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
            self._arrival_event = self.clock.schedule(at_s if at_s > now_s else now_s, self._arrive)

    def replace_future_arrivals(self, arrival_times_s: Sequence[float]) -> None:
        """The images not yet admitted arrive at these times instead (beyond the paper).

        For a lookahead's copy of the cluster: scoring a rule on a future drawn from the arrival
        process, rather than on the workload's own future, which no router can know
        (:class:`~hetsched.slim.router_training.teachers.RolloutTeacher` with sampled futures).

        Raises:
            ValueError: Unless there is one time per image still to arrive, in order, none
                before now.
        """
        remaining = self.images_to_arrive
        index = len(self._arrival_times_s) - remaining
        times = [float(t) for t in arrival_times_s]
        if len(times) != remaining:
            raise ValueError(f"expected {remaining} future arrival times, got {len(times)}")
        if any(b < a for a, b in pairwise(times)):
            raise ValueError("future arrival times must be in order")
        if times and times[0] < self.clock.now_s():
            raise ValueError(
                f"future arrival at {times[0]} s is before now ({self.clock.now_s()} s)"
            )
        if self._arrival_event is not None:
            self._arrival_event.cancel()
        self._arrival_times_s = self._arrival_times_s[:index] + times
        self._schedule_next_arrival()

    def _arrive(self) -> None:
        """Admits every image due by now, each stamped with its *scheduled* arrival time.

        In simulation the event fires at that time; live, a busy loop may fire it late, and the
        lag is the system's delay, not the client's: stamping ``now`` instead hid it from the
        latency and the deadline, and let images due just before the measurement window count
        in it (attainment above 100 % on a lagging loop).
        """
        now = self.clock.now_s()
        times, offset = self._arrival_times_s, self._arrival_offset
        slo_s, payload_of = self.config.slo_s, self._image_payload
        while self.arrived - offset < len(times) and times[self.arrived - offset] <= now:
            image_id = self.arrived
            due_s = times[image_id - offset]
            payload = None if payload_of is None else payload_of(image_id)
            self.fifo.append(ImageRequest(image_id, due_s, due_s, due_s + slo_s, payload=payload))
            self.arrived += 1
        self._schedule_next_arrival()

    # -- segment completions --------------------------------------------------------------------

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
            release = completion.release
            for request in requests:
                release(server, request.booked_s)
        power_w, utilizations, variance = servers_telemetry(self.servers)
        if len(requests) == 1:
            self.utilization_variances.append(variance)
        else:
            self.utilization_variances.extend([variance] * len(requests))
        num_segments, prior, fifo = self.config.num_segments, self.accuracy.prior, self.fifo
        for request in requests:
            widths = request.widths
            widths.append(executed_width)
            request.location = server
            latency_s = now - request.fifo_enter_s
            request.energy_j += power_w * latency_s
            segment = request.segment = request.segment + 1
            block = request.block
            assert block is not None  # set when it was routed
            if segment >= num_segments:
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
                block.accuracy_signals.append(prior(widths))
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

    # -- servers and lifetime -------------------------------------------------------------------

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
    def images_to_arrive(self) -> int:
        """Images scheduled that have not arrived yet."""
        return len(self._arrival_times_s) - (self.arrived - self._arrival_offset)

    @property
    def last_arrival_s(self) -> float | None:
        """When the latest admitted image was due (None before the first)."""
        index = self.arrived - self._arrival_offset - 1
        return self._arrival_times_s[index] if index >= 0 else None

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

    Written out rather than with NumPy (once per batch): the same additions in the same order as
    ``np.mean`` and ``np.var`` over so few servers (NumPy adds fewer than eight values one after
    the other), so the figures are bit-identical.
    """
    power_w = 0.0
    utilizations = []
    for server in servers:
        telemetry = server.telemetry()
        power_w += telemetry.power_w
        utilizations.append(telemetry.utilization_pct)
    count = len(utilizations)
    mean = 0.0
    for utilization in utilizations:
        mean += utilization / 100.0
    mean /= count
    variance = 0.0
    for utilization in utilizations:
        deviation = utilization / 100.0 - mean
        variance += deviation * deviation
    return power_w / count, tuple(utilizations), variance / count
