"""Predicted completion times for the router's state: the device cost model plus current queues.

Heuristic routers (least predicted completion time, SlackFit, INFaaS-style width choice) and the
learned router's extra features need to know, before placing the head request, how long it would
take on each server at each width. This module answers from two things the cluster knows:

* **the cost model**: seconds a batch of ``n`` requests of (segment, width, previous width) takes
  alone on a server's device (:data:`BatchSeconds`; the simulated device model, or a profile's);
* **the backlog**: the device-seconds of work already sent to each server and not finished yet.
  Each dispatched request books its per-request share of a full batch (B_max requests: under load
  batches fill, so that is the throughput a queued request costs); its segment's completion
  releases it again.

A prediction is ``transfer + backlog + service at batch size 1`` (a lone request's latency): for
the next segment, and for the rest of the image if every remaining segment ran on that server at
the same width. It ignores contention between concurrent batches, so it is a lower bound where a
device runs several batches at once; that is what a practitioner's rule would use.
:meth:`CompletionModel.predict_block` answers the same for the head sent in a block of ``n``
requests that runs as one batch of ``n`` at every remaining segment (the block a rule places
with a group size), which a device whose batch time grows with the batch (a CPU) needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hetsched.slim.routers.base import Prediction

BatchSeconds = Callable[[int, float, float, int], float]
"""(segment, width, previous width, batch size) -> seconds the batch takes alone on a device."""

TransferEstimate = Callable[[int, float | None, int | None, int], float]
"""(segment, previous width, from server, to server) -> predicted seconds to move the input, without
booking a shared channel."""

IMAGE_WIDTH = 1.0
"""The previous width of segment 0's input (the image)."""

_SegmentKey = tuple[int, float, float]


class CompletionModel:
    """Per-server tables of service times and the backlog each server carries.

    Args:
        batch_seconds: One cost function per server, in router index order.
        transfer_estimate: The link's predicted transfer time (no booking).
        widths: Every width requests and instances may have (the executors' W).
        num_segments: Segments per image.
        backlog_batch_size: Batch size whose per-request share a queued request books (B_max).
    """

    def __init__(
        self,
        batch_seconds: Sequence[BatchSeconds],
        transfer_estimate: TransferEstimate,
        widths: Sequence[float],
        num_segments: int,
        backlog_batch_size: int,
    ) -> None:
        self.transfer_estimate = transfer_estimate
        self.num_segments = num_segments
        self._batch_seconds = tuple(batch_seconds)
        self._block_rest_s: list[dict[tuple[int, float, float, int], float]] = [
            {} for _ in batch_seconds
        ]
        """Per server: seconds from a key's segment to the image's end for a block of n
        requests, filled on first use (keys x block sizes)."""
        keys = [
            (segment, width, prev)
            for segment in range(num_segments)
            for width in widths
            for prev in ((IMAGE_WIDTH,) if segment == 0 else widths)
        ]
        self.request_cost_s: list[dict[_SegmentKey, float]] = [
            {key: cost(*key, backlog_batch_size) / backlog_batch_size for key in keys}
            for cost in batch_seconds
        ]
        """Per server: device-seconds one queued request of a key books in the backlog."""
        self.segment_s: list[dict[_SegmentKey, float]] = [
            {key: cost(*key, 1) for key in keys} for cost in batch_seconds
        ]
        """Per server: seconds one lone request of a key takes."""
        self.rest_of_image_s: list[dict[_SegmentKey, float]] = [
            {key: self._rest_s(segment_s, *key) for key in keys} for segment_s in self.segment_s
        ]
        """Per server: seconds of a lone request from this key's segment to the image's end, the
        later segments at the same width."""
        self.backlog_s = [0.0] * len(batch_seconds)
        """Per server: device-seconds booked and not yet released."""

    def _rest_s(
        self, segment_s: dict[_SegmentKey, float], segment: int, width: float, prev: float
    ) -> float:
        later = sum(segment_s[(k, width, width)] for k in range(segment + 1, self.num_segments))
        return segment_s[(segment, width, prev)] + later

    def _block_rest(self, server: int, segment: int, width: float, prev: float, n: int) -> float:
        table = self._block_rest_s[server]
        rest_s = table.get((segment, width, prev, n))
        if rest_s is None:
            cost = self._batch_seconds[server]
            later = range(segment + 1, self.num_segments)
            rest_s = cost(segment, width, prev, n) + sum(cost(k, width, width, n) for k in later)
            table[(segment, width, prev, n)] = rest_s
        return rest_s

    def book(self, server: int, segment: int, width: float, prev_width: float | None) -> float:
        """Books a dispatched request on ``server``'s backlog; returns the cost to release."""
        cost_s = self.request_cost_s[server][
            (segment, width, IMAGE_WIDTH if prev_width is None else prev_width)
        ]
        self.backlog_s[server] += cost_s
        return cost_s

    def release(self, server: int, cost_s: float) -> None:
        """Removes a finished request's booked cost (never below zero: rounding)."""
        left_s = self.backlog_s[server] - cost_s
        self.backlog_s[server] = left_s if left_s > 0.0 else 0.0

    def predict(
        self,
        server: int,
        segment: int,
        prev_width: float | None,
        location: int | None,
        widths: Sequence[float],
    ) -> Prediction:
        """(transfer s, next segment done s per width, image done s per width) for the head
        request placed on ``server``; times are seconds from now."""
        transfer_s = self._transfer_s(server, segment, prev_width, location)
        wait_s = transfer_s + self.backlog_s[server]
        prev = IMAGE_WIDTH if prev_width is None else prev_width
        segment_s, rest_s = self.segment_s[server], self.rest_of_image_s[server]
        segment_done = tuple(wait_s + segment_s[(segment, w, prev)] for w in widths)
        image_done = tuple(wait_s + rest_s[(segment, w, prev)] for w in widths)
        return transfer_s, segment_done, image_done

    def predict_block(
        self,
        server: int,
        segment: int,
        prev_width: float | None,
        location: int | None,
        widths: Sequence[float],
        requests: int,
    ) -> tuple[float, ...]:
        """Image done s per width, from now, for the head request placed on ``server`` in a
        block of ``requests`` that runs as one batch at every remaining segment (``requests``
        1: :meth:`predict`'s image done)."""
        wait_s = self._transfer_s(server, segment, prev_width, location) + self.backlog_s[server]
        prev = IMAGE_WIDTH if prev_width is None else prev_width
        n = max(1, requests)
        return tuple(wait_s + self._block_rest(server, segment, w, prev, n) for w in widths)

    def _transfer_s(
        self, server: int, segment: int, prev_width: float | None, location: int | None
    ) -> float:
        """Predicted seconds to move the head's input to ``server`` (0 where it lies)."""
        if location == server:
            return 0.0
        return self.transfer_estimate(segment, prev_width, location, server)
