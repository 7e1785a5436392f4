"""Algorithm 1's state, held for speed: loaded instances and the per-key request FIFOs.

The greedy executor (:mod:`hetsched.slim.executor.greedy`) owns these; they are plain slotted
classes because the simulator creates and walks them on every request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from hetsched.slim.executor.backend import SegmentKey


class Instance:
    """A loaded instance i_s(seg, w, device, busy, t_last) of Algorithm 1's state; it is busy
    exactly while it is out of its free list (``pool``)."""

    __slots__ = ("batch", "end_batch", "handle", "pool", "segment", "t_last_s", "width")

    def __init__(
        self,
        segment: int,
        width: float,
        handle: Any,
        now_s: float,
        pool: list[Instance],
        end_batch: Callable[[Instance, Sequence[Any]], None],
    ) -> None:
        self.segment = segment
        self.width = width
        self.handle = handle
        self.t_last_s = now_s
        self.pool = pool
        """The free list of its (segment, width), where it goes back when its batch ends."""
        self.batch: tuple[list[float], list[Callable[..., None]], list[Any]] = ([], [], [])
        """The running batch's enqueue times, ``done`` callbacks and payloads."""
        self.end_batch = partial(end_batch, self)
        """The backend's ``done`` for its batches (one per instance, not one per batch)."""


class KeyQueue:
    """The FIFO of one key (seg, w_req, w_prev): its waiting requests q(seg, w_req, t_enq, w_prev).

    A request is held as one entry in each of three deques (enqueue time, ``done``, payload), not
    as one tuple: under overload hundreds of thousands wait, and a tuple holding a callback is an
    object the garbage collector walks on every full collection (it halved the simulator's speed).
    """

    __slots__ = (
        "departed",
        "dones",
        "enqueued_s",
        "fitting",
        "payloads",
        "pool_key",
        "segment_key",
    )

    def __init__(self, segment_key: SegmentKey, fitting: tuple[list[Instance], ...]) -> None:
        self.segment_key = segment_key
        self.pool_key = (segment_key.segment, segment_key.width)
        self.fitting = fitting
        """FINDFREEBESTFIT's candidates: free lists of widths >= w_req, smallest first."""
        self.enqueued_s: deque[float] = deque()
        self.dones: deque[Callable[..., None]] = deque()
        self.payloads: deque[Any] = deque()
        self.departed = 0
        """Requests of this key that left in a batch while their places in the global FIFO order
        are still there (they are skipped when they reach its head)."""

    def take(self, count: int) -> tuple[list[float], list[Callable[..., None]], list[Any]]:
        """Removes the ``count`` oldest requests (line 4) as (enqueue times, dones, payloads)."""
        enqueued_s, dones, payloads = self.enqueued_s, self.dones, self.payloads
        if count == len(dones):  # all of them: the usual case below saturation
            taken = list(enqueued_s), list(dones), list(payloads)
            enqueued_s.clear()
            dones.clear()
            payloads.clear()
            return taken
        return (
            [enqueued_s.popleft() for _ in range(count)],
            [dones.popleft() for _ in range(count)],
            [payloads.popleft() for _ in range(count)],
        )
