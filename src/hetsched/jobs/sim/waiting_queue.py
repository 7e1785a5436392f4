"""The waiting jobs, in arrival order and in priority order, kept up to date at a cost that does
not grow with the queue's length where the policy allows it.

A production trace can hold tens of thousands of waiting jobs for days (one large job blocking
an FCFS queue while bulk submissions keep arriving). Scoring, sorting and compacting that queue at
every scheduling pass made each pass cost O(Q log Q). Instead:

- a policy whose scores depend on nothing but the job (FCFS, SJF, F1: ``static_scores = True``)
  is scored once per job, on arrival, and the priority order is kept by inserting arrivals at
  their place (a binary search and a memory move); with ``recompute_interval_s`` (Slurm's
  ``PriorityCalcPeriod``) the same holds between refreshes. Every other policy is re-scored and
  re-sorted at every pass, as before. Either way the order is the one a stable sort of the scores
  gives (ties: arrival order);
- started jobs stay in the arrays, marked by :attr:`WaitingQueue.waiting`, until they are half
  of them; then both orders are compacted at once (amortised O(1) per start). Readers of
  :meth:`WaitingQueue.ordered` skip entries that are no longer waiting.

Jobs arrive in index order (the table is sorted by submit time), so the arrival order is
ascending job index and "the jobs that arrived after job j" is a binary search.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Scorer = Callable[[np.ndarray, float], np.ndarray]


class WaitingQueue:
    """Waiting jobs of a simulation.

    Args:
        num_jobs: Rows of the job table.
        score: Scores queued jobs at a time (lower runs first).
        static_scores: The scores never change once computed (scored once, on arrival).
        recompute_interval_s: Re-score everything only this often (None: every pass, unless
            ``static_scores``).

    Attributes:
        waiting: Mask over jobs: arrived and not started.
    """

    def __init__(
        self,
        num_jobs: int,
        score: Scorer,
        static_scores: bool,
        recompute_interval_s: float | None,
    ) -> None:
        self._score = score
        self._static = static_scores
        self._interval = recompute_interval_s
        self._next_refresh_s = -math.inf
        self.waiting = np.zeros(num_jobs, dtype=bool)
        self._scores = np.full(num_jobs, np.nan)
        self._arrived: list[int] = []  # since the last pass
        # Both orders hold the same jobs: every merged arrival not compacted away yet.
        self._count = 0
        self._stale = 0  # entries that no longer wait
        self._newest = -1
        self._by_arrival = np.empty(64, dtype=np.int64)
        self._by_priority = np.empty(64, dtype=np.int64)
        self._priority_scores = np.empty(64)  # the scores of ``_by_priority``, ascending

    def __len__(self) -> int:
        """Jobs waiting (merged or not)."""
        return self._count - self._stale + len(self._arrived)

    def arrive(self, index: int) -> None:
        """Job ``index`` starts waiting (it joins the orders at the next pass)."""
        self._arrived.append(index)
        self.waiting[index] = True

    def start(self, index: int) -> None:
        """Job ``index`` stops waiting (its entries become stale)."""
        self.waiting[index] = False
        self._stale += 1

    def newest(self) -> int:
        """The last job merged into the orders (-1 before any)."""
        return self._newest

    def ordered(self, now_s: float) -> np.ndarray:
        """Jobs in priority order at ``now_s`` (a pass begins), possibly with stale entries
        (``waiting`` False) that the caller skips. A view: valid until the next call."""
        new = np.array(self._arrived, dtype=np.int64)
        self._arrived = []
        self._reserve(len(new))
        count = self._count
        self._by_arrival[count : count + len(new)] = new
        if len(new):
            self._newest = int(new[-1])
        if not self._static and (self._interval is None or now_s >= self._next_refresh_s):
            queue = self._by_arrival[: count + len(new)]
            queue = queue[self.waiting[queue]]
            self._count, self._stale = len(queue), 0
            self._by_arrival[: self._count] = queue
            scores = self._score(queue, now_s)
            self._scores[queue] = scores
            if self._interval is not None:
                self._next_refresh_s = now_s + self._interval
            rank = np.argsort(scores, kind="stable")
            self._by_priority[: self._count] = queue[rank]
            self._priority_scores[: self._count] = scores[rank]
        elif len(new):
            # Scored once, on arrival; slotted in after equal scores (they arrived earlier).
            scores = self._score(new, now_s)
            self._scores[new] = scores
            rank = np.argsort(scores, kind="stable")
            new, scores = new[rank], scores[rank]
            ranked = self._priority_scores[:count]
            at = np.searchsorted(ranked, scores, side="right")
            if int(at[0]) == count:  # all after the current last (FCFS): an append
                self._by_priority[count : count + len(new)] = new
                self._priority_scores[count : count + len(new)] = scores
            else:
                order = np.insert(self._by_priority[:count], at, new)
                self._by_priority[: len(order)] = order
                self._priority_scores[: len(order)] = np.insert(ranked, at, scores)
            self._count += len(new)
        return self._by_priority[: self._count]

    def in_priority_order(self, jobs: np.ndarray) -> np.ndarray:
        """``jobs`` (in arrival order) sorted as the last :meth:`ordered` ranked them."""
        if len(jobs) < 2:
            return jobs
        return jobs[np.argsort(self._scores[jobs], kind="stable")]

    def in_arrival_order(self) -> np.ndarray:
        """The waiting jobs merged into the orders, in arrival (= submission) order."""
        queue = self._by_arrival[: self._count]
        return queue[self.waiting[queue]]

    def arrived_after(self, index: int) -> np.ndarray:
        """The waiting jobs merged after job ``index``, in arrival order."""
        queue = self._by_arrival[: self._count]
        jobs = queue[int(np.searchsorted(queue, index, side="right")) :]
        return jobs[self.waiting[jobs]]

    def compact_if_stale(self) -> None:
        """Drops the stale entries once they are half of the orders (amortised O(1))."""
        if 2 * self._stale > self._count:
            self._compact()

    def _compact(self) -> None:
        count = self._count
        arrival = self._by_arrival[:count]
        arrival = arrival[self.waiting[arrival]]
        priority = self._by_priority[:count]
        keep = self.waiting[priority]
        self._count = len(arrival)
        self._by_arrival[: self._count] = arrival
        self._by_priority[: self._count] = priority[keep]
        self._priority_scores[: self._count] = self._priority_scores[:count][keep]
        self._stale = 0

    def _reserve(self, extra: int) -> None:
        """Room for ``extra`` more entries in each order."""
        need = self._count + extra
        if need > len(self._by_arrival):
            size = 2 * need
            self._by_arrival = np.resize(self._by_arrival, size)
            self._by_priority = np.resize(self._by_priority, size)
            self._priority_scores = np.resize(self._priority_scores, size)
