"""The executor's compute-slot bound (beyond the paper; the live CPU backend's ``batch_slots``).

A backend that computes at most N batches at once declares ``batch_slots = N``; while N of the
executor's batches run, no other starts, so requests that arrive meanwhile join one batch when a
slot frees instead of each waiting for a core in a batch of its own. A backend without the
attribute (the simulated device, GPUs) keeps Algorithm 1 as the paper has it: the golden tests
pin that; here the bound itself is checked.
"""

import random

import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.sim.simulated_backend import SimulatedBackend
from tests.slim.executor.conftest import WIDTHS, CheckedBackend


class SlottedBackend(CheckedBackend):
    """The checked simulated device, declaring a bound of batches that compute at once."""

    def __init__(self, inner, vram_cap_bytes, batch_slots):
        super().__init__(inner, vram_cap_bytes)
        self.batch_slots = batch_slots
        self.peak_running = 0

    def run_batch(self, handle, key, inputs, done):
        super().run_batch(handle, key, inputs, done)
        self.peak_running = max(self.peak_running, len(self.busy))


def slotted_executor(costs, batch_slots, **knobs):
    loop = EventLoop()
    spec = DEVICES["rtx-2080-ti"]
    config = ExecutorConfig(**knobs)
    backend = SlottedBackend(SimulatedBackend(spec, costs, loop), spec.memory_bytes, batch_slots)
    return loop, GreedyExecutor(backend, loop, config), backend


def submit_at(loop, executor, at_s, segment, prev_width, request_id, finished):
    def arrive():
        executor.submit(
            segment,
            1.0,
            prev_width,
            lambda width, output: finished.append(output),
            payload=request_id,
        )

    loop.schedule(at_s, arrive)


@pytest.mark.parametrize(
    ("batch_slots", "expected"), [(None, [[0], [1], [2, 3]]), (1, [[0], [1, 2, 3]])]
)
def test_requests_wait_for_a_slot_and_leave_together(costs, batch_slots, expected):
    """Segment 0 runs request 0; three segment-1 requests arrive one by one while it runs.

    Unbounded, the first of them loads an instance of its own key and starts alone (the paper's
    greedy start) and the next two form the next batch; with one slot they wait for request 0's
    batch to end and leave as one batch of three.
    """
    loop, executor, backend = slotted_executor(costs, batch_slots)
    finished: list[int] = []
    submit_at(loop, executor, 0.0, 0, None, 0, finished)
    for request_id in (1, 2, 3):
        submit_at(loop, executor, 1e-6 * request_id, 1, 1.0, request_id, finished)
    loop.run()
    assert [ids for _, _, ids in backend.batches] == expected
    assert sorted(finished) == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("batch_slots", [1, 2])
def test_never_more_batches_than_slots_and_nothing_stalls(costs, seed, batch_slots):
    """Random arrivals over every key: at most ``batch_slots`` batches ever run at once, every
    request finishes exactly once, and the bound forms fewer, larger batches than without it."""
    runs = {}
    for slots in (None, batch_slots):
        rng = random.Random(seed)
        loop, executor, backend = slotted_executor(
            costs, slots, scale_queue_threshold=rng.choice([1, 4, 32])
        )
        finished: list[int] = []
        at_s = 0.0
        count = rng.randint(50, 200)
        for request_id in range(count):
            at_s += rng.expovariate(2000.0)
            segment = rng.randrange(4)
            prev_width = None if segment == 0 else rng.choice(WIDTHS)
            submit_at(loop, executor, at_s, segment, prev_width, request_id, finished)
        loop.run()
        assert sorted(finished) == list(range(count))
        runs[slots] = backend
    assert runs[batch_slots].peak_running <= batch_slots
    assert runs[None].peak_running > batch_slots
    assert len(runs[batch_slots].batches) < len(runs[None].batches)
