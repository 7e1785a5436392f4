"""Scaled workloads and their submission at arrival times."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.core.errors import ConfigError
from hetsched.jobs.slurm.requested_comment import read_requested_comment
from hetsched.jobs.slurm.workload import (
    WorkloadScale,
    scale_workload,
    submit_requests,
    submit_workload,
)
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.synthetic import generate

SCALE = WorkloadScale(min_run_s=1.0, max_run_s=10.0, arrival_span_s=20.0, max_gpus=4)


@pytest.fixture
def workload():
    return scale_workload(fill_requested_times(generate("philly", 32, seed=3), "auto", 3), SCALE)


def test_scaling_keeps_order_and_bounds(workload):
    trace = generate("philly", 32, seed=3)
    assert workload.run_time_s.min() == pytest.approx(1.0)
    assert workload.run_time_s.max() == pytest.approx(10.0)
    # Same ranking of run times as the trace (the map is monotone).
    assert np.all(np.diff(workload.run_time_s[np.argsort(trace.run_time_s, kind="stable")]) >= 0)
    assert workload.submit_time_s[0] == 0.0 and workload.submit_time_s[-1] == pytest.approx(20.0)
    assert set(workload.num_gpus.tolist()) <= {1, 2, 3, 4}
    assert (workload.cpus == workload.num_gpus).all()
    assert set(workload.user.tolist()) == {"root"}


def test_batch_arrivals_and_bad_scales():
    jobs = fill_requested_times(generate("helios", 8, seed=1), "auto", 1)
    batch = scale_workload(jobs, WorkloadScale(arrival_span_s=0.0))
    assert (batch.submit_time_s == 0).all()
    with pytest.raises(ConfigError, match="requested times"):
        scale_workload(generate("helios", 8, seed=1), SCALE)
    with pytest.raises(ConfigError):
        WorkloadScale(min_run_s=5.0, max_run_s=1.0)
    with pytest.raises(ConfigError):
        WorkloadScale(max_gpus=0)


def test_requests_cover_the_sleep(workload):
    for i, request in enumerate(submit_requests(workload, partition="debug")):
        assert request.sleep_s == workload.run_time_s[i]
        assert request.time_limit_s > request.sleep_s
        assert request.time_limit_s >= request.requested_time_s
        assert request.partition == "debug" and request.num_gpus == workload.num_gpus[i]


def test_submitted_comments_pass_the_adapters_bounds(workload):
    """Slurm rounds the limit up to whole minutes; the comment must still lie in its last minute,
    or a trusting adapter would fall back to the limit."""
    for request in submit_requests(workload):
        limit_s = 60.0 * math.ceil(request.time_limit_s / 60.0)
        comment = next(a for a in request.argv() if a.startswith("--comment="))
        reading = read_requested_comment(comment.removeprefix("--comment="), limit_s)
        assert reading.problem is None
        assert reading.requested_s == pytest.approx(request.requested_time_s, abs=1e-3)


class FakeSubmitter:
    """Records sbatch requests at the fake clock's time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.submitted = []

    def submit(self, request):
        self.submitted.append((self.now, request.name))
        return 1000 + len(self.submitted)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_jobs_are_submitted_at_their_arrival_times(workload):
    fake = FakeSubmitter()
    ids = submit_workload(fake, workload, clock=lambda: fake.now, sleep=fake.sleep)
    assert ids == list(range(1001, 1001 + len(workload)))
    times = np.array([t for t, _ in fake.submitted]) - 100.0
    assert np.allclose(times, workload.submit_time_s)
