"""Parsing of captured Slurm 22.05 ``squeue --json`` / ``sinfo --json`` output, and of records
that any user or an untested Slurm could make odd: one bad record is skipped, never fatal."""

from __future__ import annotations

import copy
import json
import math

import pytest

from hetsched.core.errors import DataError
from hetsched.jobs.slurm.records import (
    load_records,
    parse_gres_gpus,
    parse_jobs,
    parse_nodes,
    select_job_records,
)

from .conftest import FIXTURES, load_fixture


def fixture_jobs(trust: bool = False):
    records = load_records((FIXTURES / "squeue_22.05.json").read_text(), "squeue", "jobs")
    return {j.job_id: j for j in parse_jobs(records, trust).jobs}


def test_squeue_jobs_in_the_real_shape():
    jobs = fixture_jobs(trust=True)
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


def test_comments_are_not_read_unless_trusted():
    assert {j.requested_time_s for j in fixture_jobs().values()} == {60.0, 120.0, 300.0}


def test_squeue_completed_jobs_keep_their_times():
    records = load_fixture("squeue_completed_22.05.json")["jobs"]
    done = {j.job_id: j for j in parse_jobs(records).jobs}[1]
    assert done.state == "COMPLETED" and not done.pending and not done.running
    assert done.end_time_s > done.start_time_s >= done.submit_time_s


def test_sinfo_busy_node():
    (node,) = parse_nodes(load_fixture("sinfo_busy_22.05.json")["nodes"]).nodes
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


@pytest.mark.parametrize("text", ["gpu:many", "gpu:-1", "gpu:\u0663", "gpu:99999999", 7])
def test_bad_gres_names_the_problem(text):
    with pytest.raises(DataError, match="gres"):
        parse_gres_gpus(text)


def test_unusable_output_fails_the_whole_read():
    with pytest.raises(DataError, match="invalid JSON"):
        load_records("squeue: error: not json", "squeue --json", "jobs")
    with pytest.raises(DataError, match="reported errors"):
        load_records(json.dumps({"errors": ["boom"], "nodes": []}), "sinfo --json", "nodes")
    with pytest.raises(DataError, match="not a list"):
        load_records(json.dumps({"jobs": {"a": 1}}), "squeue --json", "jobs")
    with pytest.raises(DataError, match="invalid JSON"):
        load_records("[" * 100_000, "squeue --json", "jobs")


def spoilt(field: str, value) -> dict:
    record = copy.deepcopy(load_fixture("squeue_22.05.json")["jobs"][1])
    if value is KeyError:
        del record[field]
    else:
        record[field] = value
    return record


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("job_state", KeyError),
        ("job_id", True),
        ("job_id", "12"),
        ("job_id", -3),
        ("priority", "high"),
        ("priority", 2**40),
        ("priority", 1.5),
        ("submit_time", float("nan")),
        ("submit_time", float("inf")),
        ("submit_time", -1),
        ("start_time", 1e300),
        ("time_limit", "INFINITE"),
        ("cpus", [1]),
        ("user_name", 12),
        ("user_name", {"name": "x"}),
        ("name", "x" * 5000),
        ("tres_per_node", "gres:gpu:lots"),
        ("shared", 3),
    ],
)
def test_one_bad_record_is_skipped_with_its_reason(field, value):
    good = load_fixture("squeue_22.05.json")["jobs"][0]
    parsed = parse_jobs([good, spoilt(field, value), "not a record"])
    assert [j.job_id for j in parsed.jobs] == [1]
    assert len(parsed.skipped) == 2 and "record #2" in parsed.skipped
    (reason,) = [r for label, r in parsed.skipped.items() if label != "record #2"]
    assert field in reason


def test_filter_reads_only_partition_and_user():
    """Records outside the filter are dropped before any other field is read."""
    broken = {"partition": "other", "user_name": "mallory", "job_id": "not even a number"}
    mine = load_fixture("squeue_22.05.json")["jobs"][0]
    oddities = [broken, 42, {"partition": ["debug"], "user_name": "root"}]
    assert select_job_records([*oddities, mine], "debug", None) == [mine]
    assert select_job_records([*oddities, mine], None, "root") == [
        oddities[2],
        mine,
    ]  # a user filter alone keeps the list-partition record; the parse then skips it
    assert select_job_records([broken, mine], None, None) == [broken, mine]
    assert select_job_records([mine], "debu", None) == []  # whole names only


def test_no_time_limit_is_infinite():
    payload = load_fixture("squeue_22.05.json")
    for value in (0, 4_294_967_295, None):
        payload["jobs"][0]["time_limit"] = value
        payload["jobs"][0]["comment"] = ""
        job = parse_jobs(payload["jobs"][:1], True).jobs[0]
        assert math.isinf(job.time_limit_s) and math.isinf(job.requested_time_s)


def test_bad_node_is_skipped():
    node = load_fixture("sinfo_busy_22.05.json")["nodes"][0]
    parsed = parse_nodes([dict(node, cpus="four"), dict(node, name="n2"), None])
    assert [n.name for n in parsed.nodes] == ["n2"]
    assert set(parsed.skipped) == {"node localhost", "record #2"}
