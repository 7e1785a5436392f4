"""Trace loaders on committed fixtures and on the real shared files; bad rows; estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.core.errors import DataError, HetschedError
from hetsched.jobs.traces import detect_format, load_trace
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import Job, JobTable


def test_swf_fixture_maps_columns_and_excludes_zero_runtime(fixtures):
    trace = load_trace(fixtures / "tiny.swf")
    jobs = trace.jobs
    assert jobs.id.tolist() == ["1", "2", "4"]
    assert dict(trace.report.excluded) == {"zero run time": 1}
    assert jobs.num_gpus.tolist() == [2, 8, 1]  # job 4: requested procs missing -> allocated
    assert jobs.requested_time_s[0] == 200 and math.isnan(jobs.requested_time_s[1])
    assert jobs.requested_source.tolist() == ["trace", "missing", "trace"]
    assert trace.cluster is not None and trace.cluster.total_gpus == 8


def test_rltune_csv_real_file(shared_traces):
    trace = load_trace(shared_traces / "rltune_synthetic_trace.csv")
    assert len(trace.jobs) == 960
    assert trace.jobs.gpu_type_names() == ["MISC", "T4"]
    first = trace.jobs.job(0)
    assert first.id == "deepspeech2-0_1" and first.num_gpus == 8 and first.run_time_s == 25
    assert first.gpu_types == frozenset({"T4"})


def test_lublin_real_file(shared_traces):
    trace = load_trace(shared_traces / "lublin_256.swf")
    assert len(trace.jobs) == 10000 and trace.cluster.total_gpus == 256
    assert np.all(np.diff(trace.jobs.submit_time_s) >= 0)
    assert np.isnan(trace.jobs.requested_time_s).all()


def test_helios_fixture(fixtures):
    trace = load_trace(fixtures / "helios_cluster_log.csv")
    jobs = trace.jobs
    assert jobs.id.tolist() == ["h1", "h2", "h3", "h5"]
    assert trace.report.excluded["never started"] == 1
    assert jobs.submit_time_s[0] == 0 and jobs.submit_time_s[1] == 60
    assert jobs.run_time_s.tolist() == [3600, 10800, 60, 1800]
    assert jobs.virtual_cluster.tolist() == ["vcEwI", "vc8Gr", "vcEwI", "vcKrW"]
    assert jobs.status[2] == "failed"


def test_philly_fixture_uses_last_attempt_gpus(fixtures):
    trace = load_trace(fixtures / "philly_cluster_job_log.json")
    jobs = trace.jobs
    assert len(jobs) == 3 and trace.report.excluded["no finished attempt"] == 1
    assert jobs.num_gpus.tolist() == [2, 16, 4]
    # Job 2: first attempt 04:31 to last attempt end 05:45, retries included.
    assert jobs.run_time_s[1] == 74 * 60
    assert jobs.status.tolist() == ["completed", "killed", "completed"]


def test_alibaba2020_fixture(fixtures):
    trace = load_trace(fixtures / "pai2020", "alibaba2020")
    jobs = {j.id: j for j in trace.jobs.to_jobs()}
    assert set(jobs) == {"job_a", "job_b", "job_c", "job_e"}
    assert trace.report.excluded["not finished"] == 1
    assert jobs["job_a"].num_gpus == 2  # 2 instances x plan_gpu 100; the ps task has no GPU
    assert jobs["job_a"].cpus == pytest.approx(16.0)  # 2 x 6 + 1 x 4 cores
    assert jobs["job_b"].num_gpus == 1  # a 50 % share takes one whole GPU
    assert jobs["job_c"].num_gpus == 8  # 4 instances x 2 GPUs
    assert jobs["job_a"].gpu_types == frozenset({"V100"})
    assert jobs["job_e"].gpu_types is None  # MISC = any type


def test_alibaba2023_fixture_with_node_list(fixtures):
    trace = load_trace(fixtures / "openb_pod_list_tiny.csv")
    jobs = trace.jobs
    assert jobs.id.tolist() == ["pod-0", "pod-1", "pod-2"]
    assert trace.report.excluded["never scheduled"] == 1
    assert jobs.run_time_s.tolist() == [1000, 750, 100]
    assert jobs.gpu_types[1] == frozenset({"V100M16", "V100M32"})
    assert jobs.cpus.tolist() == [8.0, 4.0, 2.0]
    assert trace.cluster.total_gpus == 11 and trace.cluster.gpu_types == ["G2", "T4", "V100M16"]


def test_alibaba2023_real_files(shared_traces):
    trace = load_trace(shared_traces / "alibaba-gpu-2023" / "openb_pod_list_gpuspec33.csv")
    assert trace.report.rows == 8152
    assert len(trace.jobs) + trace.report.excluded["never scheduled"] == 8152
    assert len(trace.cluster.nodes) == 1213
    models = dict(zip(*np.unique(trace.cluster.node_type_code, return_counts=True), strict=True))
    assert models[trace.cluster.gpu_types.index("G2")] == 549
    assert sum(1 for t in trace.jobs.gpu_types if t) > 1000


@pytest.mark.parametrize(
    ("name", "text", "line", "field"),
    [
        ("bad.swf", "; MaxProcs: 4\n1 0 -1 x 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1\n", 2, "run_time"),
        ("bad.swf", "1 0 -1 10 1\n", 1, None),
        ("bad.csv", "a,0,0,10,two,-1,-1,-1,-1,-1,2,1,1,-1,0,-1,-1,-1,0\n", 1, "num_gpus"),
        ("bad.csv", "a,0,0,10,1,-1,-1,-1,-1,-1,2,1,1,-1,0,-1,-1,-1,9\n", 1, "gpu_type"),
    ],
)
def test_malformed_row_names_file_line_and_field(tmp_path, name, text, line, field):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load_trace(path)
    assert info.value.path == str(path) and info.value.line == line
    assert info.value.field == field
    assert f"{path}:{line}" in str(info.value)


def test_skip_bad_rows_counts_what_it_skipped(tmp_path):
    good = "1 0 -1 10 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1"
    path = tmp_path / "mixed.swf"
    path.write_text(f"{good}\n2 5 -1 oops 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1\n3 9 -1 5\n")
    trace = load_trace(path, skip_bad_rows=True)
    assert len(trace.jobs) == 1 and len(trace.report.skipped) == 2
    assert trace.report.as_dict()["skipped_bad_rows"] == 2


def test_helios_missing_column_and_bad_time(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text("job_id,user\n1,u\n")
    with pytest.raises(DataError, match="missing columns"):
        load_trace(path)
    path.write_text(
        "job_id,user,vc,gpu_num,cpu_num,state,submit_time,start_time,end_time\n"
        "1,u,vc1,1,1,COMPLETED,yesterday,2020-01-01 00:00:00,2020-01-01 00:01:00\n"
    )
    with pytest.raises(DataError) as info:
        load_trace(path)
    assert info.value.line == 2 and info.value.field == "submit_time"


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(DataError, match="cannot tell"):
        detect_format(tmp_path / "trace.parquet")
    with pytest.raises(DataError, match="not found"):
        load_trace(tmp_path / "absent.swf")
    with pytest.raises(HetschedError, match="unknown trace format"):
        load_trace(tmp_path / "absent.swf", "parquet")


def _table(runs, users=None):
    jobs = [
        Job(str(i), float(i), float(r), 1, user=(users or ["u"] * len(runs))[i])
        for i, r in enumerate(runs)
    ]
    return JobTable.from_jobs(jobs)


def test_estimates_never_silently_use_true_runtime():
    table = _table([100.0, 5000.0, 30.0, 7200.0], ["a", "a", "b", "a"])
    with pytest.raises(HetschedError, match="no requested time"):
        fill_requested_times(table, "trace")
    noisy = fill_requested_times(table, "noisy", seed=3)
    assert np.all(noisy.requested_time_s >= table.run_time_s)
    assert not np.array_equal(noisy.requested_time_s, table.run_time_s)
    assert set(noisy.requested_source) == {"noisy"}
    history = fill_requested_times(table, "auto", seed=3)
    # a's 2nd job: 1.5 x 100 s rounded up to 5 minutes; a's 3rd: 1.5 x 5000 s -> 3 h.
    assert history.requested_time_s[1] == 300 and history.requested_time_s[3] == 3 * 3600
    oracle = fill_requested_times(table, "oracle")
    assert np.array_equal(oracle.requested_time_s, table.run_time_s)
    assert np.array_equal(
        fill_requested_times(table, "noisy", seed=3).requested_time_s, noisy.requested_time_s
    )


def test_synthetic_profiles_match_published_statistics():
    from hetsched.jobs.traces.synthetic import PROFILES, generate

    for name in ("philly", "helios", "alibaba"):
        profile = PROFILES.get(name)
        jobs = generate(name, 20000, seed=11)
        rate = (len(jobs) - 1) / jobs.submit_time_s[-1]
        assert rate == pytest.approx(profile.arrival_rate_per_s, rel=0.05)
        # Heavy-tailed (sigma 2) means converge slowly: within 25 % at 20k jobs.
        assert jobs.run_time_s.mean() == pytest.approx(profile.mean_run_s, rel=0.25)
        assert jobs.run_time_s.max() <= profile.max_run_s
        single = float(np.mean(jobs.num_gpus == 1))
        assert single == pytest.approx(profile.gpu_count_probs[0], abs=0.02)
        assert len(set(jobs.user.tolist())) <= profile.users
    helios = generate("helios", 500, seed=1)
    assert set(helios.virtual_cluster.tolist()) <= {"vc1", "vc2", "vc3", "vc4", "vc5"}
    alibaba = generate("alibaba", 3000, seed=1)
    typed = np.mean([t is not None for t in alibaba.gpu_types])
    assert typed == pytest.approx(1 / 3, abs=0.04)


def test_rltune_csv_round_trip(tmp_path):
    from hetsched.jobs.traces.rltune_csv import write_rltune_csv
    from hetsched.jobs.traces.synthetic import generate

    table = generate("alibaba", 50, seed=4)
    write_rltune_csv(table, tmp_path / "t.csv")
    back = load_trace(tmp_path / "t.csv").jobs
    assert back.id.tolist() == table.id.tolist()
    assert np.allclose(back.submit_time_s, table.submit_time_s)
    assert np.array_equal(back.num_gpus, table.num_gpus)
    assert back.gpu_types.tolist() == table.gpu_types.tolist()
    assert np.isnan(back.requested_time_s).all()


def test_philly_null_end_time_is_excluded(tmp_path):
    path = tmp_path / "log.json"
    path.write_text(
        '[{"jobid": "a", "submitted_time": "2017-10-03 04:21:52", "status": "Running",'
        ' "attempts": [{"start_time": "2017-10-03 04:22:00", "end_time": "None", "detail": []}]},'
        ' {"jobid": "b", "submitted_time": "2017-10-03 04:21:52", "status": "Pass",'
        ' "attempts": [{"start_time": "2017-10-03 04:22:00", "end_time": "2017-10-03 04:23:00",'
        ' "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}]'
    )
    trace = load_trace(path)
    assert trace.jobs.id.tolist() == ["b"] and trace.report.excluded["no finished attempt"] == 1
