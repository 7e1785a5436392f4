"""End-to-end runs of `hetsched jobs simulate`, `trace-info` and `synth` with tiny budgets."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.jobs.traces import load_trace

runner = CliRunner()


def _invoke(*args: str):
    result = runner.invoke(typer_app, ["jobs", *args])
    assert result.exit_code == 0, result.output
    return result


def test_simulate_swf_fixture_compares_modes(fixtures, tmp_path):
    out = tmp_path / "run"
    result = _invoke(
        "simulate", "--trace", str(fixtures / "tiny.swf"), "--policy", "fcfs,sjf,wfp3,f1",
        "--compare-modes", "--out", str(out),
    )  # fmt: skip
    assert "BSLD" in result.output and "pool8" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert len(payload["results"]) == 4 * 5
    modes = {row["queue_mode"] for row in payload["results"]}
    assert modes == {"strict", "committed", "rlscheduler-backfill", "easy", "greedy"}
    assert payload["load_report"]["excluded"] == {"zero run time": 1}
    assert "excluded 1 of 4 rows: zero run time" in result.output
    assert (out / "wait_cdf.png").stat().st_size > 0
    assert (out / "utilisation.png").stat().st_size > 0
    assert (out / "jobs_fcfs_easy.csv").read_text().count("\n") == 4


def test_synth_then_simulate_with_windows(tmp_path):
    trace = tmp_path / "helios.csv"
    _invoke("synth", "--profile", "helios", "--jobs", "300", "--seed", "1", "--out", str(trace))
    assert len(load_trace(trace).jobs) == 300
    out = tmp_path / "win"
    result = _invoke(
        "simulate", "--trace", str(trace), "--cluster", "helios", "--policy", "slurm,qssf",
        "--backfill", "--windows", "2", "--window-size", "100", "--speed-factors",
        "--out", str(out),
    )  # fmt: skip
    assert "2 windows of 100 jobs" in result.output
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [(r["policy"], r["queue_mode"]) for r in rows] == [("slurm", "easy"), ("qssf", "easy")]


def test_backfill_rule_selects_rlscheduler_backfilling(fixtures, tmp_path):
    out = tmp_path / "rls"
    _invoke(
        "simulate", "--trace", str(fixtures / "tiny.swf"), "--policy", "sjf",
        "--backfill-rule", "rlscheduler", "--out", str(out),
    )  # fmt: skip
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [(r["policy"], r["queue_mode"]) for r in rows] == [("sjf", "rlscheduler-backfill")]


def test_simulate_alibaba2023_fixture_uses_its_node_list(fixtures, tmp_path):
    result = _invoke(
        "simulate", "--trace", str(fixtures / "openb_pod_list_tiny.csv"), "--policy", "fcfs",
        "--placement", "spread", "--out", str(tmp_path / "a"),
    )  # fmt: skip
    assert "alibaba2023" in result.output


def test_trace_info_on_fixture(fixtures):
    result = _invoke("trace-info", str(fixtures / "philly_cluster_job_log.json"))
    assert "no finished attempt" in result.output and "jobs" in result.output


def test_user_errors_exit_2_with_one_line(fixtures, tmp_path):
    bad = tmp_path / "bad.swf"
    bad.write_text("1 0 -1 ten 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1\n")
    cases = [
        (["simulate", "--trace", str(fixtures / "tiny.swf"), "--policy", "lottery"], "fcfs"),
        (["simulate", "--trace", str(bad)], "run_time"),
        (["simulate", "--synthetic", "helios", "--backfill", "--strict"], "exclude"),
        (["simulate", "--synthetic", "helios", "--modes", "easy,lazy"], "lazy"),
        (["simulate", "--synthetic", "helios", "--backfill-rule", "conservative"], "conservative"),
        (["simulate", "--synthetic", "helios", "--backfill-rule", "easy", "--strict"], "exclude"),
    ]
    for args, needle in cases:
        proc = subprocess.run(
            [sys.executable, "-c", "from hetsched.cli import app; app()", "jobs", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_skip_bad_rows_flag_reports_the_count(tmp_path):
    trace = tmp_path / "mixed.swf"
    good = "1 0 -1 10 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1"
    trace.write_text(f"; MaxProcs: 4\n{good}\n2 1 -1 oops 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1\n")
    out = tmp_path / "skip"
    _invoke(
        "simulate", "--trace", str(trace), "--policy", "fcfs", "--skip-bad-rows", "--out", str(out)
    )
    report = json.loads((out / "results.json").read_text())["load_report"]
    assert report["skipped_bad_rows"] == 1


def test_helios_fixture_vcs_are_mapped_onto_the_paper_slice(fixtures, tmp_path):
    out = tmp_path / "h"
    result = _invoke(
        "simulate", "--trace", str(fixtures / "helios_cluster_log.csv"), "--policy", "fcfs",
        "--out", str(out),
    )  # fmt: skip
    assert "helios" in result.output
    mapping = json.loads((out / "results.json").read_text())["virtual_cluster_mapping"]
    # Real Helios VC names; ranked by GPU-seconds onto the largest paper VCs.
    assert mapping == {"vc8Gr": "vc1", "vcEwI": "vc2", "vcKrW": "vc3"}
    assert "mapped 3 trace VCs" in result.output
