"""The section 5.6 harness without a Slurm: metrics, simulated arms, the wait that rides out a
controller restart, TIMEOUT and never-started jobs recorded instead of raised, and which
differences count as gains."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from hetsched.core.errors import HetschedError
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.slurm.client import SlurmCommandError
from hetsched.jobs.slurm.experiment import (
    arm_metrics,
    comparisons,
    experiment_arms,
    live_outcome,
    simulate_arm,
    summarise,
    wait_until_done,
)
from hetsched.jobs.slurm.experiment_stats import compare, spread_of
from hetsched.jobs.slurm.local_config import LocalClusterSpec
from hetsched.jobs.slurm.records import SlurmJob
from hetsched.jobs.slurm.workload import WorkloadScale, scale_workload
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.synthetic import generate

SCALE = WorkloadScale(min_run_s=1.0, max_run_s=10.0, arrival_span_s=20.0, max_gpus=4)


@pytest.fixture
def workload():
    return scale_workload(fill_requested_times(generate("philly", 32, seed=3), "auto", 3), SCALE)


def test_arm_metrics_by_hand():
    submit = np.array([0.0, 0.0, 1.0])
    start = np.array([0.0, 2.0, 2.0])
    end = np.array([2.0, 4.0, 3.0])
    gpus = np.array([4, 2, 2])
    makespan, wait, util = arm_metrics(submit, start, end, gpus, total=4)
    assert makespan == 4.0 and wait == pytest.approx(1.0)
    assert util == pytest.approx(100.0 * (8 + 4 + 2) / 16)
    assert all(math.isnan(v) for v in arm_metrics(*(np.zeros(0),) * 4, total=4))


def test_three_simulated_arms_run_the_same_jobs(workload):
    arms = experiment_arms(make_policy("sjf"))
    assert [(a.name, a.priority_type, a.policy is None) for a in arms] == [
        ("fifo", "priority/basic", True),
        ("multifactor", "priority/multifactor", True),
        ("hetsched", "priority/multifactor", False),
    ]
    spec = LocalClusterSpec(node_gpus=(4,))
    runs = [simulate_arm(workload, a, spec, 1.0 if a.policy else None) for a in arms]
    gpu_s = float((workload.run_time_s * workload.num_gpus).sum())
    for run in runs:
        assert sorted(run.start_order) == list(range(len(workload)))
        assert run.makespan_s >= gpu_s / 4 - 1e-9  # no run beats perfect packing
        assert 0 < run.gpu_utilisation_pct <= 100.0
    assert len({tuple(r.start_order) for r in runs}) == 3
    two_nodes = simulate_arm(workload, arms[2], LocalClusterSpec(node_gpus=(4, 2)), 1.0)
    assert two_nodes.makespan_s < runs[2].makespan_s  # six GPUs finish sooner than four


def job(job_id: int, state: str, submit: float, start: float, end: float) -> SlurmJob:
    return SlurmJob(
        job_id, "j", "root", "debug", state, 1, submit, start, end, 60.0, 60.0, 1, 1, 1, None
    )


def test_timeout_and_never_started_jobs_are_recorded_not_raised():
    jobs = [
        job(1, "COMPLETED", 100.0, 100.0, 104.0),
        job(2, "TIMEOUT", 100.0, 101.0, 161.0),  # hit its limit: counts with the time it ran
        job(3, "CANCELLED", 102.0, 0.0, 130.0),  # cancelled while waiting: no start
    ]
    outcome = live_outcome(jobs, np.array([2, 2, 4]), total_gpus=4)
    assert outcome.final_states == {"COMPLETED": 1, "TIMEOUT": 1, "CANCELLED": 1}
    assert outcome.never_started == 1 and outcome.start_order == [0, 1]
    makespan, wait, util = outcome.metrics
    assert (makespan, wait) == (61.0, 0.5)
    assert util == pytest.approx(100.0 * (2 * 4 + 2 * 60) / (4 * 61))


class FlakyQueue:
    """A client whose reads fail for a while (a restarting slurmctld), then answer."""

    def __init__(self, answers: list) -> None:
        self.answers = answers

    def jobs(self):
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_wait_rides_out_a_controller_restart(caplog):
    down = SlurmCommandError(["squeue", "--json"], "Unable to contact slurm controller", 1)
    running = [job(1, "RUNNING", 0, 1, 9), job(2, "PENDING", 0, 0, 0)]
    finished = [
        job(1, "COMPLETED", 0, 1, 5),
        job(2, "TIMEOUT", 0, 2, 62),
        job(9, "PENDING", 0, 0, 0),
    ]
    queue = FlakyQueue([running, down, down, down, finished])
    clock = iter(range(100))
    with caplog.at_level("INFO", logger="hetsched.jobs.slurm"):
        done = wait_until_done(queue, [1, 2], 50.0, sleep=lambda s: None, clock=lambda: next(clock))
    assert {i: j.state for i, j in done.items()} == {1: "COMPLETED", 2: "TIMEOUT"}
    messages = [r.getMessage() for r in caplog.records]
    assert sum("retrying" in m for m in messages) == 1 and "the queue answers again" in messages


def test_purged_and_lost_jobs_do_not_hang_the_wait():
    """A finished job Slurm purges later still counts; one the controller lost (killed before
    it saved the job) is recorded as lost after ``lost_after_s`` of answers without it."""
    early = [job(1, "COMPLETED", 0, 1, 2), job(2, "RUNNING", 0, 1, 9), job(3, "PENDING", 0, 0, 0)]
    later = [job(2, "COMPLETED", 0, 1, 9)]  # 1 purged (MinJobAge), 3 lost in a crash
    queue = FlakyQueue([early, later])
    clock = iter(range(100))
    done = wait_until_done(
        queue, [1, 2, 3], 50.0, lost_after_s=5.0, sleep=lambda s: None, clock=lambda: next(clock)
    )
    assert {i: j and j.state for i, j in done.items()} == {1: "COMPLETED", 2: "COMPLETED", 3: None}
    outcome = live_outcome([done[i] for i in (1, 2, 3)], np.array([1, 1, 1]), total_gpus=4)
    assert outcome.final_states == {"COMPLETED": 2, "LOST": 1} and outcome.never_started == 1


def test_the_wait_gives_up_at_its_deadline():
    queue = FlakyQueue([[job(1, "RUNNING", 0, 1, 9), job(2, "COMPLETED", 0, 1, 2)]])
    clock = iter(range(100))
    with pytest.raises(HetschedError, match="1 of 2 jobs still unfinished after 5 s"):
        wait_until_done(queue, [1, 2], 5.0, sleep=lambda s: None, clock=lambda: next(clock))


def test_spread_and_verdicts():
    spread = spread_of([10.0, 12.0, 14.0, math.nan])
    assert (spread.mean, spread.std, spread.low, spread.high, spread.runs) == (
        12.0,
        2.0,
        10.0,
        14.0,
        3,
    )
    slower = spread_of([15.0, 16.0, 17.0])
    assert compare("a", spread, "b", slower, "makespan_s").verdict == "gain"
    assert compare("a", slower, "b", spread, "makespan_s").verdict == "loss"
    overlapping = spread_of([13.5, 20.0])
    found = compare("a", spread, "b", overlapping, "mean_wait_s")
    assert found.verdict == "within spread" and found.change == pytest.approx(
        100 * (12 - 16.75) / 16.75
    )
    utilisation = compare(
        "a", spread_of([90.0, 91.0]), "b", spread_of([80.0, 82.0]), "gpu_utilisation_pct"
    )
    assert (utilisation.verdict, utilisation.change) == ("gain", pytest.approx(9.5))
    assert compare("a", spread, "b", spread_of([]), "makespan_s").verdict == "within spread"


def test_summary_and_comparisons_per_mode(workload):
    arms = experiment_arms(make_policy("sjf"))
    spec = LocalClusterSpec(node_gpus=(4,))
    runs = [simulate_arm(workload, a, spec, None) for a in arms]
    live = [dataclasses.replace(r, mode="live", repeat=k) for k in range(2) for r in runs]
    summary = summarise(runs + live)
    assert list(summary) == [(a.name, m) for m in ("simulated", "live") for a in arms]
    assert summary[("fifo", "live")]["makespan_s"].runs == 2
    found = comparisons(summary)
    assert len(found) == 2 * 2 * 3 and {c.baseline for c in found} == {"fifo", "multifactor"}
