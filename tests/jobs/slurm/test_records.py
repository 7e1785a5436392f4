"""Parsing of captured Slurm 22.05 ``squeue --json`` / ``sinfo --json`` output."""

from __future__ import annotations

import json
import math

import pytest

from hetsched.core.errors import DataError
from hetsched.jobs.slurm.records import parse_gres_gpus, parse_sinfo_json, parse_squeue_json

from .conftest import FIXTURES, load_fixture


def test_squeue_jobs_in_the_real_shape():
    jobs = {j.job_id: j for j in parse_squeue_json((FIXTURES / "squeue_22.05.json").read_text())}
    assert sorted(jobs) == [1, 2, 3, 4, 5, 6, 7, 8]
    first = jobs[1]
    assert (first.state, first.pending, first.running) == ("PENDING", True, False)
    assert (first.num_gpus, first.cpus, first.user, first.partition) == (2, 2, "root", "debug")
    assert first.time_limit_s == 60.0
    assert first.requested_time_s == 25.0  # from the comment, finer than the 1-minute limit
    assert first.shared is None and first.submit_time_s > 1.7e9
    assert jobs[3].running and jobs[3].num_gpus == 4 and jobs[3].start_time_s > 0
    assert jobs[5].shared == "none"  # made exclusive with oversubscribe=no
    assert jobs[6].shared == "none" and jobs[6].requested_time_s == 300.0  # --exclusive, --time=5
    assert jobs[7].priority == 0 and jobs[7].num_gpus == 1  # held; gres gpu:gpu:1
    assert jobs[8].num_gpus == 0 and jobs[8].requested_time_s == 60.0
    assert jobs[4].priority == 5000


def test_squeue_completed_jobs_keep_their_times():
    jobs = {
        j.job_id: j
        for j in parse_squeue_json(json.dumps(load_fixture("squeue_completed_22.05.json")))
    }
    done = jobs[1]
    assert done.state == "COMPLETED" and not done.pending and not done.running
    assert done.end_time_s > done.start_time_s >= done.submit_time_s


def test_sinfo_busy_node():
    (node,) = parse_sinfo_json((FIXTURES / "sinfo_busy_22.05.json").read_text())
    assert (node.name, node.partitions, node.gpu_type) == ("localhost", ("debug",), "gpu")
    assert (node.num_gpus, node.used_gpus, node.cpus, node.alloc_cpus) == (4, 4, 4, 4)
    assert node.state == "allocated" and node.usable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:4", ("gpu", 4)),
        ("gpu:a100:2(IDX:0-1)", ("a100", 2)),
        ("gres:gpu:2", ("gpu", 2)),
        ("gres:gpu:gpu:1", ("gpu", 1)),
        ("mps:100,gpu:v100:8(S:0-1)", ("v100", 8)),
        ("", ("gpu", 0)),
        (None, ("gpu", 0)),
    ],
)
def test_gres_strings(text, expected):
    assert parse_gres_gpus(text) == expected


def test_bad_output_names_the_problem():
    with pytest.raises(DataError, match="invalid JSON"):
        parse_squeue_json("squeue: error: not json")
    payload = load_fixture("squeue_22.05.json")
    del payload["jobs"][0]["job_state"]
    with pytest.raises(DataError, match="job_state"):
        parse_squeue_json(json.dumps(payload))
    with pytest.raises(DataError, match="reported errors"):
        parse_sinfo_json(json.dumps({"errors": ["boom"], "nodes": []}))
    with pytest.raises(DataError, match="bad GPU count"):
        parse_gres_gpus("gpu:many")


def test_no_time_limit_is_infinite():
    payload = load_fixture("squeue_22.05.json")
    payload["jobs"][0]["time_limit"] = 0
    payload["jobs"][0]["comment"] = ""
    job = parse_squeue_json(json.dumps(payload))[0]
    assert math.isinf(job.time_limit_s) and math.isinf(job.requested_time_s)
