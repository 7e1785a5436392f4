"""The waiting queue's incremental priority order is the stable sort of the scores, whether the
policy is scored once per job (static), re-scored every pass, or re-scored on an interval."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.seeding import make_rng
from hetsched.jobs.sim.waiting_queue import WaitingQueue


@pytest.mark.parametrize(("static", "interval"), [(True, None), (False, None), (False, 50.0)])
def test_order_matches_a_stable_sort_through_arrivals_and_starts(static, interval):
    rng = make_rng(4)
    n = 400
    base = rng.integers(0, 20, size=n).astype(float)  # many ties: order among them is arrival

    def score(queue: np.ndarray, now_s: float) -> np.ndarray:
        return base[queue] if static else base[queue] - (now_s // 100) * (queue % 3)

    queue = WaitingQueue(n, score, static, interval)
    scored_at = np.full(n, np.nan)  # what the queue should rank each job by
    refresh_s = -np.inf
    arrived = 0
    for step in range(120):
        now_s = 10.0 * step
        for _ in range(int(rng.integers(0, 6))):
            if arrived < n:
                queue.arrive(arrived)
                arrived += 1
        waiting = np.flatnonzero(queue.waiting)
        if not len(queue):
            continue
        order = queue.ordered(now_s)
        live = order[queue.waiting[order]]
        if not static and (interval is None or now_s >= refresh_s):
            scored_at[waiting] = score(waiting, now_s)
            refresh_s = now_s + (interval or 0.0)
        fresh = waiting[np.isnan(scored_at[waiting])]
        scored_at[fresh] = score(fresh, now_s)
        expected = waiting[np.argsort(scored_at[waiting], kind="stable")]
        assert np.array_equal(live, expected), step
        for index in rng.choice(live, size=min(len(live), int(rng.integers(0, 4))), replace=False):
            queue.start(int(index))
        queue.compact_if_stale()
        assert len(queue) == int(queue.waiting.sum())


def test_arrived_after_and_arrival_order():
    queue = WaitingQueue(10, lambda q, now: -q.astype(float), True, None)
    for index in range(6):
        queue.arrive(index)
    assert queue.ordered(0.0).tolist() == [5, 4, 3, 2, 1, 0]
    queue.start(4)
    assert queue.arrived_after(2).tolist() == [3, 5]
    assert queue.in_arrival_order().tolist() == [0, 1, 2, 3, 5]
    assert queue.newest() == 5
    assert queue.in_priority_order(np.array([1, 3, 5])).tolist() == [5, 3, 1]
