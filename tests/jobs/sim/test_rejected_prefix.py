"""EASY's scans skip the run of the queue an earlier scan turned down on numbers alone: only under
numbers that turn down at least as much, and with the same schedule as a scan from the head."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.jobs.cluster.catalog import homogeneous_pool
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim import backfill
from hetsched.jobs.sim.backfill import RejectedPrefix
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.hpc_synthetic import generate_hpc_trace
from hetsched.jobs.traces.transforms import compress_arrivals


def test_a_run_is_skipped_only_under_numbers_that_turn_down_as_much():
    memo = RejectedPrefix()
    assert memo.start(head=7, layout=0, free_gpus=4, now_s=10.0, shadow_s=100.0, extra=2) == 0
    memo.learn(50, free_gpus=4, now_s=10.0, shadow_s=100.0, extra=2)
    assert memo.start(7, 0, free_gpus=3, now_s=11.0, shadow_s=90.0, extra=1) == 50
    assert memo.start(7, 0, free_gpus=4, now_s=10.0, shadow_s=100.0, extra=2) == 50
    assert memo.start(7, 0, free_gpus=5, now_s=10.0, shadow_s=100.0, extra=2) == 0  # more free
    assert memo.start(7, 0, free_gpus=4, now_s=9.0, shadow_s=100.0, extra=2) == 0  # earlier now
    assert memo.start(7, 0, free_gpus=4, now_s=10.0, shadow_s=101.0, extra=2) == 0  # later shadow
    assert memo.start(7, 0, free_gpus=4, now_s=10.0, shadow_s=100.0, extra=3) == 0  # more extra
    memo.learn(80, free_gpus=1, now_s=12.0, shadow_s=100.0, extra=2)
    assert memo.start(7, 0, free_gpus=1, now_s=12.0, shadow_s=100.0, extra=2) == 80  # the longer
    assert memo.start(7, 0, free_gpus=2, now_s=12.0, shadow_s=100.0, extra=2) == 50
    assert memo.start(7, 1, free_gpus=1, now_s=12.0, shadow_s=100.0, extra=2) == 0  # entries moved
    assert memo.start(7, 0, free_gpus=1, now_s=12.0, shadow_s=100.0, extra=2) == 0  # forgotten


@pytest.mark.parametrize("policy", ["fcfs", "sjf"])
def test_skipping_keeps_the_schedule_of_scans_from_the_head(policy, monkeypatch):
    # A crowded queue: a RICC-like trace on a machine a sixteenth of the size, arrivals x2.
    jobs = compress_arrivals(generate_hpc_trace(3000, seed=3), 2.0)
    jobs = jobs.take(np.flatnonzero(jobs.num_gpus <= 512))
    cluster = homogeneous_pool(512)
    skipped: list[int] = []
    start = RejectedPrefix.start

    def counting_start(self, *args):
        skipped.append(start(self, *args))
        return skipped[-1]

    def run() -> np.ndarray:
        config = SimulationConfig("easy")
        return Simulator(jobs, cluster, make_policy(policy), config).run().start_s

    monkeypatch.setattr(RejectedPrefix, "start", counting_start)
    with_skips = run()
    assert sum(skipped) > 10_000, "the queue was crowded enough for long skips"
    monkeypatch.setattr(backfill.RejectedPrefix, "start", lambda self, *args: 0)
    np.testing.assert_array_equal(with_skips, run())
