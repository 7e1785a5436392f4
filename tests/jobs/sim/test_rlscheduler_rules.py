"""`committed` and `rlscheduler-backfill` follow RLScheduler's loop: hand-computed cases for each
point where its rule differs from EASY, and fixed Lublin windows against a procedural oracle."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.jobs.cluster.catalog import homogeneous_pool
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces import load_trace
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import Job, JobTable
from tests.jobs.conftest import SHARED_DATA
from tests.jobs.sim.rlscheduler_reference import rlscheduler_keys, rlscheduler_starts


def _starts(rows, mode: str, policy: str = "fcfs", slots: int = 4) -> list[float]:
    """rows: (submit, run, processors[, requested]); requested defaults to the run time."""
    jobs = [
        Job(f"j{i}", row[0], row[1], row[2], requested_time_s=row[3] if len(row) > 3 else row[1])
        for i, row in enumerate(rows)
    ]
    config = SimulationConfig(queue_mode=mode)  # type: ignore[arg-type]
    result = Simulator(
        JobTable.from_jobs(jobs), homogeneous_pool(slots), make_policy(policy), config
    )
    return result.run().start_s.tolist()


def test_committed_keeps_the_job_that_blocked_not_the_one_that_started():
    # The minimal case: J1 starts at t=1 and J2 blocks, so J2 is the committed pick;
    # J3 (shorter) arrives at t=2 and must wait behind J2 until J0 ends at t=100.
    rows = [(0, 100, 2), (1, 10, 1), (1, 20, 3), (2, 15, 1)]
    assert _starts(rows, "committed", "sjf") == [0, 1, 100, 100]
    assert _starts(rows, "strict", "sjf")[3] == 2  # strict re-ranks: J3 overtakes


def test_rlscheduler_backfill_needs_an_end_strictly_before_the_shadow_time():
    # J1 (4 slots) waits for J0 until t=10; J2 would end exactly at t=10.
    rows = [(0, 10, 3), (1, 5, 4), (2, 8, 1)]
    assert _starts(rows, "easy")[2] == 2  # EASY: end <= shadow time
    assert _starts(rows, "rlscheduler-backfill")[1:] == [10, 15]  # strict <: J2 waits
    shorter = [(0, 10, 3), (1, 5, 4), (2, 7, 1)]
    assert _starts(shorter, "rlscheduler-backfill")[2] == 2


def test_rlscheduler_backfill_keeps_the_first_shadow_time():
    # J0 asks for 50 s but ends at t=10; the head J1 then only waits for JA (ends at 30).
    # EASY recomputes the shadow time (30) and keeps J2 (ends 37) out; RLScheduler keeps the
    # shadow time of t=1 (50), backfills J2 at t=12 and the head waits until J2 ends.
    rows = [(0, 10, 2, 50), (0, 30, 2), (1, 10, 4), (12, 25, 2)]
    easy = _starts(rows, "easy")
    assert easy[2] == 30 and easy[3] == 40
    rls = _starts(rows, "rlscheduler-backfill")
    assert rls[3] == 12 and rls[2] == 37


def test_rlscheduler_backfill_scans_in_submission_order():
    # Both J2 (50 s) and J3 (20 s) could backfill when JA ends at t=10, but only one fits.
    # EASY under SJF tries J3 first; RLScheduler scans in submission order and starts J2.
    rows = [(0, 100, 2), (0, 10, 2), (1, 10, 4), (2, 50, 2), (3, 20, 2)]
    easy = _starts(rows, "easy", "sjf")
    assert easy[4] == 10 and easy[3] == 30
    rls = _starts(rows, "rlscheduler-backfill", "sjf")
    assert rls[3] == 10 and rls[4] == 60


def test_rlscheduler_backfill_has_no_extra_nodes_rule():
    # J2 runs past the shadow time (t=100) but fits in the slot the head leaves free then.
    rows = [(0, 100, 2), (1, 10, 3), (2, 500, 1)]
    assert _starts(rows, "easy")[2] == 2
    assert _starts(rows, "rlscheduler-backfill")[1:] == [100, 100]


@pytest.fixture(scope="module")
def lublin():
    path = SHARED_DATA / "traces" / "lublin_256.swf"
    if not path.is_file():
        pytest.skip(f"shared data not found at {path}")
    return load_trace(path)


# One fixed 1024-job window per case, six different windows in all.
@pytest.mark.parametrize(
    ("policy", "estimate", "start"),
    [
        ("fcfs", "oracle", 1500),
        ("sjf", "oracle", 6200),
        ("f1", "oracle", 3100),
        ("fcfs", "user-history", 8000),
        ("sjf", "user-history", 4400),
        ("f1", "user-history", 1500),
    ],
)
def test_fixed_lublin_windows_match_the_rlscheduler_loop(lublin, policy, estimate, start):
    # Lublin has no requested times: RLScheduler then uses the run time (our "oracle"); the
    # user-history estimates add early ends, where a stale shadow time matters.
    window = fill_requested_times(lublin.jobs, estimate, seed=0).window(start, 1024)
    submit, requested = window.submit_time_s, window.requested_time_s
    key = rlscheduler_keys(submit, requested, window.num_gpus)[policy]
    slots = int(lublin.cluster.total_gpus)
    for mode, backfill in (("committed", False), ("rlscheduler-backfill", True)):
        config = SimulationConfig(queue_mode=mode)  # type: ignore[arg-type]
        got = Simulator(window, lublin.cluster, make_policy(policy), config).run().start_s
        want = rlscheduler_starts(
            submit, window.run_time_s, requested, window.num_gpus, slots, key, backfill
        )
        assert np.array_equal(got, want), mode
