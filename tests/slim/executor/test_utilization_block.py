"""A head blocked by U_blk with nothing running waits for the retry, not for the unloader."""

from __future__ import annotations

from tests.slim.executor.conftest import make_executor

BUSY_UNTIL_S = 0.1


def test_a_utilization_block_lifts_at_the_next_retry_not_at_the_next_unload(costs) -> None:
    """Someone else keeps the device busy until 0.1 s; an idle instance arms the unloader 10 s
    away. The blocked load must happen at the first retry after 0.1 s: waiting for the unload
    (which frees memory, not utilisation) stalled the live executor for most of its rounds."""
    loop, executor, backend = make_executor(
        costs, util_block_pct=50.0, idle_unload_s=10.0, blocked_retry_s=0.005
    )
    backend.utilization_pct = lambda: 100.0 if 0.0 < loop.now_s() < BUSY_UNTIL_S else 0.0
    finished: list[float] = []
    executor.submit(0, 1.0, 1.0, lambda width: None)
    loop.run(until_s=0.0)  # the first instance is loaded at t=0 and runs
    loop.schedule(
        0.01, lambda: executor.submit(1, 1.0, 1.0, lambda w: finished.append(loop.now_s()))
    )
    loop.run(until_s=5.0)
    assert len(finished) == 1 and finished[0] < BUSY_UNTIL_S + 0.5
