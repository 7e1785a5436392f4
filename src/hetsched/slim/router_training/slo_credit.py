"""Holds each decision's reward until the images it moved have completed, to charge SLO misses.

The SLO term of the extended reward (:mod:`hetsched.slim.routers.reward`, ζ m_t) needs the share of
a block's images that missed their deadline, which is known only when those images have run all
their remaining segments: a block that makes an image late at segment 0 finishes long before the
image does. The block's eq. (7) outcome therefore waits here until its last image completes; the
decision is then credited with both. Everything read is public: the image ids of the routed block
(the head of the cluster's FIFO when it was routed) and the cluster's completed-image records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hetsched.slim.cluster.records import CompletedImage
from hetsched.slim.routers.reward import BlockOutcome


@dataclass
class _Pending:
    """One decision waiting for its block outcome and its images."""

    images_left: int
    missed: int = 0
    images: int = 0
    outcome: BlockOutcome | None = None


@dataclass
class SloCredit:
    """Per decision: the block outcome, the count of its images still running, the misses."""

    _pending: dict[int, _Pending] = field(default_factory=dict)
    _waiters: dict[int, list[int]] = field(default_factory=dict)
    """Image id -> decisions that moved it and wait for it to complete."""
    _ready: list[tuple[int, BlockOutcome, float]] = field(default_factory=list)

    def routed(self, decision_id: int, image_ids: Iterable[int]) -> None:
        """A block of these (not yet complete) images was routed as ``decision_id``."""
        ids = list(image_ids)
        self._pending[decision_id] = _Pending(images_left=len(ids), images=len(ids))
        for image_id in ids:
            self._waiters.setdefault(image_id, []).append(decision_id)

    def block_done(self, decision_id: int, outcome: BlockOutcome) -> None:
        """The block's segment finished with ``outcome``."""
        pending = self._pending[decision_id]
        pending.outcome = outcome
        self._release_if_ready(decision_id, pending)

    def images_done(self, completed: Iterable[CompletedImage]) -> None:
        """These images completed (each exactly once)."""
        for image in completed:
            for decision_id in self._waiters.pop(image.image_id, ()):
                pending = self._pending[decision_id]
                pending.images_left -= 1
                pending.missed += 0 if image.met_slo else 1
                self._release_if_ready(decision_id, pending)

    def _release_if_ready(self, decision_id: int, pending: _Pending) -> None:
        if pending.outcome is not None and pending.images_left == 0:
            del self._pending[decision_id]
            share = pending.missed / pending.images if pending.images else 0.0
            self._ready.append((decision_id, pending.outcome, share))

    def take_ready(self) -> list[tuple[int, BlockOutcome, float]]:
        """(decision id, block outcome, missed share) of every decision now complete, once."""
        ready, self._ready = self._ready, []
        return ready

    @property
    def waiting(self) -> int:
        """Decisions not credited yet."""
        return len(self._pending)
