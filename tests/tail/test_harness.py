"""Harness accounting on hand-made counters, and the contention generator's real duty."""

from __future__ import annotations

import time

import pytest

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.contention import Contention, achieved_duty
from hetsched.tail.harness import EmulatedNode, measure_one, outside_utilisation, p90
from hetsched.tail.measurement_worker import core_busy_s


def test_core_busy_counts_steal_but_not_idle_iowait_or_guest_twice():
    before = {"user": 10.0, "system": 2.0, "idle": 50.0, "iowait": 1.0, "steal": 0.0, "guest": 3.0}
    after = {"user": 10.6, "system": 2.1, "idle": 50.2, "iowait": 1.05, "steal": 0.05, "guest": 3.2}
    # 0.6 user (of which 0.2 guest, already inside user) + 0.1 system + 0.05 steal
    assert core_busy_s(before, after) == pytest.approx(0.75)
    assert core_busy_s(after, after) == 0.0


def test_outside_utilisation_excludes_the_pods_own_cpu():
    # 2 cores busy 1.5 s of 2 s of capacity in a 1 s window; the pod used 0.9 s of it.
    assert outside_utilisation(1.5, 0.9, 2, 1.0) == pytest.approx(0.3)
    assert outside_utilisation(0.5, 0.9, 2, 1.0) == 0.0  # counter skew cannot go negative
    assert outside_utilisation(9.0, 0.0, 2, 1.0) == 1.0
    with pytest.raises(DataError):
        outside_utilisation(1.0, 0.0, 0, 1.0)


def test_achieved_duty():
    assert achieved_duty(0.4, 2, 1.0) == pytest.approx(0.2)
    with pytest.raises(DataError):
        achieved_duty(0.4, 0, 1.0)


def test_p90_is_mlperf_index():
    assert p90([float(i) for i in range(10, 0, -1)]) == 10.0  # sorted[int(0.9 * 10)] = sorted[9]
    assert p90([float(i) for i in range(20)]) == 18.0


def test_contention_never_exceeds_its_duty():
    """Busy by wall clock: preemption can only lower the CPU a loop gets, never raise it."""
    with Contention((0,), 0.5) as contention:
        time.sleep(0.3)
        cpu_s, start = contention.cpu_seconds(), time.perf_counter()
        time.sleep(0.6)
        duty = achieved_duty(contention.cpu_seconds() - cpu_s, 1, time.perf_counter() - start)
    assert contention.processes == 1
    assert 0.0 < duty <= 0.5 + 0.1
    with Contention((0,), 0.0) as idle:
        assert idle.processes == 0 and idle.cpu_seconds() == 0.0


def test_measure_one_rejects_more_threads_than_cores():
    node = EmulatedNode("one", (0,), 2.3)
    with pytest.raises(HetschedError, match="threads"):
        measure_one(None, "cnn-s", node, 0.0, 8, torch_threads=2)


def test_measure_grid_appends_each_row_so_an_interrupted_run_keeps_its_points(
    tmp_path, monkeypatch
):
    import csv

    from hetsched.tail import harness

    class FakeWorker:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    measured = []

    def fake_measure_one(worker, model, node, duty, queries, threads):
        if len(measured) == 2:
            raise HetschedError("worker died")
        measured.append((model, duty))
        return dict.fromkeys(harness.CSV_COLUMNS, 0.0) | {"model": model, "contention_duty": duty}

    monkeypatch.setattr(harness, "MeasurementWorker", FakeWorker)
    monkeypatch.setattr(harness, "measure_one", fake_measure_one)
    out = tmp_path / "sub" / "rows.csv"
    node = EmulatedNode("n", (0,), 2.3)
    with pytest.raises(HetschedError, match="worker died"):
        harness.measure_grid({"cnn-s": 4}, [node], [0.0, 0.4, 0.8], out_csv=out)
    rows = list(csv.DictReader(out.open()))
    assert [(r["model"], float(r["contention_duty"])) for r in rows] == measured
    assert list(rows[0]) == list(harness.CSV_COLUMNS)


@pytest.mark.timeout(60)
def test_ctrl_c_reaching_the_busy_loops_does_not_hang_the_parent():
    import os
    import signal

    with Contention((0,), 0.5) as contention:
        time.sleep(1.0)  # the loop is running and polls its stop event
        for _ in range(20):  # Ctrl-C goes to the whole process group
            os.kill(contention._procs[0].pid, signal.SIGINT)
            time.sleep(0.01)
        assert contention._procs[0].is_alive()  # it leaves Ctrl-C to the parent
    assert not contention._procs[0].is_alive()
