"""Contention features from /proc (PSI, run queue, steal): fixtures, absence and hostile input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hetsched.core.errors import DataError
from hetsched.tail.node_features import capacity_from_agent_json
from hetsched.tail.proc_contention import (
    StatSample,
    parse_loadavg,
    parse_psi,
    parse_stat,
    read_contention,
    steal_fraction,
)

PROC = Path(__file__).parent / "fixtures" / "proc"


def test_fixture_proc_gives_every_feature():
    got = read_contention(2, PROC, window_s=0.0)
    assert (got.psi_cpu_some_avg10, got.psi_cpu_some_avg60) == (75.64, 44.90)
    assert got.psi_memory_some_avg10 == 1.50
    assert got.runq_per_core == 3.0 and got.load1_per_core == pytest.approx(2.725)
    assert got.absent[0].startswith("stat:")  # one read of a fixture: no time passed, no steal
    assert got.steal_fraction is None and len(got.absent) == 1


def test_a_kernel_without_psi_leaves_those_features_absent_and_says_so(tmp_path):
    shutil.copytree(PROC, tmp_path / "proc")
    shutil.rmtree(tmp_path / "proc" / "pressure")
    got = read_contention(2, tmp_path / "proc", window_s=0.0)
    assert got.psi_cpu_some_avg10 is None and got.psi_memory_some_avg10 is None
    assert got.runq_per_core == 3.0
    assert [a.split(":")[0] for a in got.absent] == ["psi_cpu", "psi_memory", "stat"]
    assert read_contention(4, tmp_path / "nothing", window_s=0.0).as_dict()["runq_per_core"] is None
    with pytest.raises(DataError, match="cores"):
        read_contention(0, PROC)


def test_this_machine_reads_without_raising():
    got = read_contention(1, window_s=0.01)
    assert got.runq_per_core is None or got.runq_per_core >= 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "some avg10=nan avg60=1 avg300=1 total=1",
        "some avg10=101 avg60=1 avg300=1 total=1",
        "some avg10=-1 avg60=1 avg300=1 total=1",
        "some avg10 avg60=1",
        "full avg10=1.0 avg60=1.0 avg300=0 total=0",
        "some avg10=1e400 avg60=1 avg300=1 total=1",
        "\x00" * 64,
    ],
)
def test_hostile_psi_is_a_one_line_data_error(text):
    with pytest.raises(DataError, match="PSI"):
        parse_psi(text)


@pytest.mark.parametrize("text", ["", "1 2 3", "x 1 1 1/2 3", "1 1 1 -1/5 3", "inf 1 1 1/2 3"])
def test_hostile_loadavg_is_a_data_error(text):
    with pytest.raises(DataError, match="loadavg"):
        parse_loadavg(text)


@pytest.mark.parametrize(
    "text",
    ["", "cpu 1 2\nprocs_running 1", "cpu 1 2 3 4 5 6 7 8\n", "cpu a b c d\nprocs_running 1"],
)
def test_hostile_stat_is_a_data_error(text):
    with pytest.raises(DataError, match="stat"):
        parse_stat(text)


def test_steal_is_the_stolen_share_of_the_ticks_between_two_reads():
    assert parse_stat((PROC / "stat").read_text()).steal_ticks == 30
    before, after = StatSample(1000, 10, 1), StatSample(1400, 110, 1)
    assert steal_fraction(before, after) == 0.25
    with pytest.raises(DataError, match="no CPU time"):
        steal_fraction(before, before)


def test_the_agent_payload_carries_contention_and_hostile_values_are_refused():
    base = {"name": "a", "freq_ghz": 2.0, "per_core_busy": [1.0, 1.0]}
    contention = read_contention(2, PROC, window_s=0.0).as_dict()
    got = capacity_from_agent_json({**base, "contention": contention})
    assert got.u_cores == 1.0 and got.runq_per_core == 3.0
    assert got.cpu_pressure == pytest.approx(0.7564)
    assert capacity_from_agent_json(base).runq_per_core is None  # an older agent
    for bad in ({"runq_per_core": "many"}, {"runq_per_core": -1}, {"psi_cpu_some_avg10": 1e9}):
        with pytest.raises(DataError, match="agent"):
            capacity_from_agent_json({**base, "contention": bad})
    with pytest.raises(DataError, match="agent"):
        capacity_from_agent_json({**base, "contention": [1, 2]})
