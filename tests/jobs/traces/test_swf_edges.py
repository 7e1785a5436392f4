"""SWF loader edges (column count, negative run times, what is reported as left out), the SWF
writer, and the seeded RICC-like generator used by the scale benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import DataError
from hetsched.jobs.traces import load_trace
from hetsched.jobs.traces.hpc_synthetic import RICC_LIKE, generate_hpc_trace
from hetsched.jobs.traces.source import load_jobs
from hetsched.jobs.traces.swf import (
    NEGATIVE_RUN_TIME,
    RLSCHEDULER_NEGATIVE_RUN_TIME_S,
    ZERO_RUN_TIME,
    load_swf,
    write_swf,
)

ROW = "{id} {submit} -1 {run} 2 -1 -1 2 100 -1 1 1 1 -1 0 -1 -1 -1"


def _swf(tmp_path, runs: list[int], extra_line: str = ""):
    rows = [ROW.format(id=i + 1, submit=10 * i, run=run) for i, run in enumerate(runs)]
    path = tmp_path / "t.swf"
    path.write_text("; MaxProcs: 4\n" + "\n".join(rows) + "\n" + extra_line)
    return path


@pytest.mark.parametrize(("columns", "line"), [(19, 3), (17, 3)])
def test_a_row_with_too_many_or_too_few_columns_is_an_error_on_its_line(tmp_path, columns, line):
    bad = " ".join(["1"] * columns)
    path = _swf(tmp_path, [5], extra_line=bad + "\n")
    with pytest.raises(DataError, match=f"expected 18 columns, got {columns}") as info:
        load_swf(path)
    assert info.value.line == line and f"t.swf:{line}" in str(info.value)
    skipped = load_swf(path, skip_bad_rows=True)
    assert len(skipped.jobs) == 1 and len(skipped.report.skipped) == 1


def test_negative_run_times_are_excluded_or_fixed_up_like_rlscheduler(tmp_path):
    path = _swf(tmp_path, [5, -3, 0, -1])
    plain = load_swf(path)
    assert plain.jobs.id.tolist() == ["1"]
    assert dict(plain.report.excluded) == {NEGATIVE_RUN_TIME: 2, ZERO_RUN_TIME: 1}
    fixed = load_swf(path, fix_negative_run_time=True)
    assert fixed.jobs.id.tolist() == ["1", "2", "4"]  # a zero run time is still dropped
    assert fixed.jobs.run_time_s.tolist() == [5, RLSCHEDULER_NEGATIVE_RUN_TIME_S, 10]
    assert dict(fixed.report.excluded) == {ZERO_RUN_TIME: 1}


def test_exclusions_are_notes_for_the_terminal(tmp_path):
    path = _swf(tmp_path, [5, -3, 0, -1], extra_line="9 9 9\n")
    loaded = load_jobs(path, skip_bad_rows=True)
    assert loaded.notes == (
        f"excluded 2 of 5 rows: {NEGATIVE_RUN_TIME}",
        f"excluded 1 of 5 rows: {ZERO_RUN_TIME}",
        f"skipped 1 of 5 malformed rows (first: {path}:6: expected 18 columns, got 3)",
    )
    assert load_jobs(None, synthetic="helios", synthetic_jobs=10).notes == ()


def test_the_fix_up_is_refused_for_other_formats(fixtures):
    with pytest.raises(DataError, match="for SWF traces"):
        load_trace(fixtures / "helios_cluster_log.csv", fix_negative_run_time=True)


def test_generated_ricc_like_trace_is_seeded_and_shaped_like_the_machine(tmp_path):
    jobs = generate_hpc_trace(20000, seed=3)
    again = generate_hpc_trace(20000, seed=3)
    assert np.array_equal(jobs.submit_time_s, again.submit_time_s)
    assert np.array_equal(jobs.run_time_s, again.run_time_s)
    assert not np.array_equal(jobs.run_time_s, generate_hpc_trace(20000, seed=4).run_time_s)
    cores = jobs.num_gpus
    assert 0.35 < np.mean(cores == 1) < 0.55 and np.mean(cores <= 8) > 0.7
    assert cores.max() <= RICC_LIKE.cores and np.median(jobs.run_time_s) < 1800
    assert np.all(jobs.requested_time_s >= jobs.run_time_s)
    offered = np.sum(jobs.run_time_s * cores) / (RICC_LIKE.cores * jobs.submit_time_s[-1])
    assert offered == pytest.approx(RICC_LIKE.offered_load, rel=0.05)
    path = tmp_path / "ricc.swf"
    write_swf(jobs, path, RICC_LIKE.cores)
    back = load_swf(path)
    assert back.cluster is not None and back.cluster.total_gpus == RICC_LIKE.cores
    assert np.array_equal(back.jobs.num_gpus, cores)
    assert np.array_equal(back.jobs.run_time_s, jobs.run_time_s)
    assert np.array_equal(back.jobs.requested_time_s, jobs.requested_time_s)
