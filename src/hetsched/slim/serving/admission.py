"""Admission control: bound the images in the system and refuse work that cannot meet its deadline.

Under overload a server that accepts everything answers everything late. The controller refuses
early instead, with a status and a reason a client can act on:

* **429 queue_full**: accepting the request would put more than ``max_images_in_system`` images in
  the system (queued or running); the client should back off and retry.
* **503 no_server**: no server is up; nothing can be served until one rejoins.
* **422 deadline_too_short**: the deadline is shorter than the fastest image ever answered, so
  no retry can meet it.
* **429 deadline_unmeetable**: the request's deadline is shorter than the expected time to serve
  it, estimated as the images ahead of it plus its own divided by the recent completion rate (an
  EWMA of images per second while busy). It is load, not a bad request: retrying later may work.

``Retry-After`` says when: the expected time for the work ahead to drain.
:meth:`AdmissionController.check` decides without reserving anything, so the HTTP layer can refuse
from a request's headers before reading its body (a refusal then costs almost nothing).

An accepted request may still miss its deadline; the front then answers it with 504 (see
:mod:`.front`), so every accepted image gets exactly one answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetsched.slim.serving.images import RequestError


@dataclass
class ThroughputEstimate:
    """Exponentially weighted completion rate while busy, in images per second.

    Only time in which images were in the system counts: after an idle spell the first
    completions would otherwise suggest a server far slower than it is.

    Args:
        half_life_s: Busy time after which an old rate counts half (adapts to load changes
            quickly while smoothing the clumps in which batches complete).
        window_s: Shortest busy time a rate is measured over.
    """

    half_life_s: float = 2.0
    window_s: float = 0.05
    images_per_s: float | None = None
    _busy_s: float = 0.0
    _images: int = 0

    def record(self, images: int, busy_s: float) -> None:
        """Counts ``images`` completed after ``busy_s`` more seconds of busy time."""
        self._images += images
        self._busy_s += busy_s
        if self._busy_s < self.window_s:
            return
        rate = self._images / self._busy_s
        if self.images_per_s is None:
            self.images_per_s = rate
        else:
            keep = 0.5 ** (self._busy_s / self.half_life_s)
            self.images_per_s = keep * self.images_per_s + (1 - keep) * rate
        self._busy_s, self._images = 0.0, 0


class AdmissionController:
    """Decides whether a request of ``n`` images may enter.

    Args:
        max_images_in_system: Images accepted and not yet answered, at most.
        deadline_headroom: A request is admitted while its expected time is at most this
            fraction of its deadline: the estimate is a mean, and the rest of the deadline
            absorbs the spread around it (1.0: admit up to the deadline itself).
    """

    def __init__(self, max_images_in_system: int, deadline_headroom: float = 1.0) -> None:
        self.max_images_in_system = max_images_in_system
        self.deadline_headroom = deadline_headroom
        self.images_in_system = 0
        self.throughput = ThroughputEstimate()
        self.fastest_image_s: float | None = None
        """The shortest time any image took from acceptance to answer: a deadline below it cannot
        be met even on an idle system at the narrowest widths."""
        self._busy_since_s: float | None = None

    def expected_wait_s(self, images: int) -> float | None:
        """Seconds until ``images`` more would be through, or None before any completed."""
        rate = self.throughput.images_per_s
        if rate is None or rate <= 0:
            return None
        return (self.images_in_system + images) / rate

    def check(
        self, images: int, *, servers_up: int, deadline_s: float | None
    ) -> RequestError | None:
        """The refusal ``images`` more would get now, or None if they fit (nothing reserved).

        Cheap enough to run on the request's headers alone, before its body is read.
        """
        if servers_up == 0:
            return RequestError(
                503, "no server is up; retry when one has rejoined", "no_server", retry_after_s=1.0
            )
        fastest_s = self.fastest_image_s
        if deadline_s is not None and fastest_s is not None and deadline_s < fastest_s:
            return RequestError(
                422,
                f"deadline {deadline_s:.3f} s is shorter than the fastest image this server has"
                f" ever answered ({fastest_s:.3f} s): it cannot be met at any load",
                "deadline_too_short",
            )
        wait_s = self.expected_wait_s(images)
        if self.images_in_system + images > self.max_images_in_system:
            return RequestError(
                429,
                f"queue full: {self.images_in_system} images in the system, {images} more would"
                f" exceed the limit of {self.max_images_in_system}",
                "queue_full",
                retry_after_s=wait_s,
            )
        budget_s = None if deadline_s is None else deadline_s * self.deadline_headroom
        # Never for an empty system: with no queue to drain the estimate has nothing to say,
        # and a refusal there would stand forever (no completion would correct the rate).
        queued = self.images_in_system > 0
        if budget_s is not None and wait_s is not None and wait_s > budget_s and queued:
            return RequestError(
                429,
                f"deadline {deadline_s:.3f} s cannot be met: serving it would take about"
                f" {wait_s:.3f} s at the recent rate (admitted up to {budget_s:.3f} s)",
                "deadline_unmeetable",
                retry_after_s=wait_s - budget_s,
            )
        return None

    def admit(
        self, now_s: float, images: int, *, servers_up: int, deadline_s: float | None
    ) -> None:
        """Reserves room for ``images`` arriving at ``now_s``, or raises.

        Raises:
            RequestError: 503 with no server up, 429 when full or the deadline is unmeetable.
        """
        refusal = self.check(images, servers_up=servers_up, deadline_s=deadline_s)
        if refusal is not None:
            raise refusal
        if self.images_in_system == 0:
            self._busy_since_s = now_s
        self.images_in_system += images

    def observe_latency(self, latency_s: float) -> None:
        """Records one answered image's time from acceptance to answer."""
        if self.fastest_image_s is None or latency_s < self.fastest_image_s:
            self.fastest_image_s = latency_s

    def release(self, now_s: float, images: int, *, completed: bool) -> None:
        """Frees room for ``images`` answered at ``now_s`` (``completed``: served, not failed)."""
        busy_s = now_s - (self._busy_since_s if self._busy_since_s is not None else now_s)
        self._busy_since_s = now_s
        self.images_in_system -= images
        self.throughput.record(images if completed else 0, busy_s)
        if self.images_in_system == 0:
            self._busy_since_s = None
