"""Fixtures of the jobs agents' tests: a small contended cluster with a synthetic Philly trace."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import JobTable
from hetsched.jobs.traces.synthetic import generate


@pytest.fixture(scope="module")
def small() -> tuple[JobTable, Cluster]:
    """400 synthetic Philly jobs on 6 nodes (3 x 2 GPUs, 3 x 8 GPUs): queues build up."""
    nodes = [Node(f"a{i}", "P100x2", 2, 24.0, 131072.0) for i in range(3)]
    nodes += [Node(f"b{i}", "P100x8", 8, 48.0, 491520.0) for i in range(3)]
    jobs = fill_requested_times(generate("philly", 400, seed=2), "noisy", seed=2)
    jobs = jobs.with_columns(num_gpus=np.minimum(jobs.num_gpus, 8))
    return jobs, Cluster(nodes, name="tiny-philly")
