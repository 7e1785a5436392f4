"""Differential test of the executor's shortcut for a request that meets an empty FIFO.

``GreedyExecutor._start_alone`` starts such a request on a free instance without queueing it
first (issue 19's speed work). It must do exactly what queueing it and running the loop
(``_enqueue`` then ``_dispatch``) does: the same batches, completions, counters, durations,
sampled series and energy, on random arrivals of random keys, group sizes and knobs.
"""

import random
from typing import Any

import pytest

from hetsched.slim.executor.greedy import GreedyExecutor
from tests.slim.executor.conftest import WIDTHS, make_executor


class QueueingExecutor(GreedyExecutor):
    """The executor without the shortcut: every request queues, then the loop runs."""

    def _start_alone(self, *_: Any) -> bool:
        return False


def run_random(costs, seed: int, executor_class: type[GreedyExecutor]) -> dict[str, Any]:
    """Submits random runs of requests (``submit_many``, as the cluster does) at random times."""
    rng = random.Random(seed)
    knobs = dict(
        max_batch=rng.choice([1, 2, 4, 16]),
        scale_queue_threshold=rng.choice([1, 3, 32]),
        idle_unload_s=rng.choice([0.001, 0.05, 2.0]),
        exact_width=rng.random() < 0.3,
        sample_interval_s=rng.choice([0.0001, 0.01]),
    )
    loop, plain, backend = make_executor(costs, **knobs)
    executor = executor_class(backend, loop, plain.config)
    finished: list[tuple[float, float, list[int]]] = []

    def done(executed_width: float, outputs: list[int]) -> None:
        finished.append((loop.now_s(), executed_width, list(outputs)))

    at_s, next_id = 0.0, 0
    for _ in range(rng.randint(20, 120)):
        at_s += rng.expovariate(rng.choice([50.0, 500.0, 5000.0]))
        segment = rng.randrange(4)
        prev_width = None if segment == 0 else rng.choice(WIDTHS)
        count = rng.choice([1, 1, 1, 2, 5])
        ids = list(range(next_id, next_id + count))
        next_id += count

        def arrive(segment=segment, width=rng.choice(WIDTHS), prev=prev_width, ids=ids):
            executor.submit_many(segment, width, prev, ids, done)

        loop.schedule(at_s, arrive)
    loop.run()
    record = executor.record
    return {
        "finished": finished,
        "batches": [(key, width, ids) for key, width, ids in backend.batches],
        "counters": (record.submitted, record.completed, record.batches),
        "instances": (record.loads, record.unloads, record.peak_vram_bytes),
        "queue_s": record.queue_durations_s,
        "request_s": record.request_durations_s,
        "series": record.series.as_dict(),
        "energy": executor.energy(),
        "end_s": loop.now_s(),
    }


@pytest.mark.parametrize("seed", range(12))
def test_shortcut_changes_nothing(costs, seed):
    shortcut = run_random(costs, seed, GreedyExecutor)
    queued = run_random(costs, seed, QueueingExecutor)
    assert shortcut["counters"][0] > 0
    assert shortcut == queued
