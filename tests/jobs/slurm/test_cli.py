"""Tiny end-to-end runs of the three commands without a Slurm: fake binaries on PATH answer with
captured 22.05 output, and the experiment runs its simulated arms only."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from typer.testing import CliRunner

from hetsched.cli import app, typer_app
from hetsched.core.errors import UnknownNameError
from hetsched.jobs.slurm.controller import SlurmUnreachableError

from .conftest import FIXTURES

runner = CliRunner()


def _invoke(*args: str):
    result = runner.invoke(typer_app, ["jobs", *args])
    assert result.exit_code == 0, result.output
    return result


def fake_scontrol(log, plugin: str = "multifactor", up: bool = True) -> str:
    """A scontrol that answers ``ping`` (UP or DOWN), prints a captured ``show config`` and logs
    every other call's arguments."""
    config = FIXTURES / f"scontrol_show_config_{plugin}_22.05.txt"
    ping = (
        "echo 'Slurmctld(primary) at localhost is UP'"
        if up
        else ("echo 'Slurmctld(primary) at localhost is DOWN' >&2; exit 1")
    )
    return (
        f'case "$1" in\n  ping) {ping} ;;\n  show) cat {config} ;;\n'
        f'  *) echo "$@" >> {log} ;;\nesac'
    )


def install_fakes(bin_dir, monkeypatch, scripts: dict[str, str]) -> None:
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def fake_binaries(tmp_path, monkeypatch):
    """``squeue``/``sinfo`` print the fixtures; ``scontrol`` logs its updates."""
    log = tmp_path / "scontrol.log"
    install_fakes(
        tmp_path / "bin",
        monkeypatch,
        {
            "squeue": f"cat {FIXTURES / 'squeue_22.05.json'}",
            "sinfo": f"cat {FIXTURES / 'sinfo_busy_22.05.json'}",
            "scontrol": fake_scontrol(log),
        },
    )
    return log


def test_slurm_applies_priorities_through_scontrol(fake_binaries, tmp_path):
    log_file = tmp_path / "changes.log"
    result = _invoke(
        "slurm",
        "--policy",
        "sjf",
        "--trust-requested-comment",
        "--interval",
        "0.01",
        "--max-scans",
        "1",
        "--top-priority",
        "5000",
        "--priority-step",
        "10",
        "--log-file",
        str(log_file),
    )
    # Job 4 (requested 3 s, first under SJF) already has 5000 in the fixture: no call for it.
    assert "1 scans, 5 changes applied" in result.output
    lines = fake_binaries.read_text().splitlines()
    assert not [line for line in lines if "jobid=4 " in line]
    assert "update jobid=6 priority=4950" in lines  # requested 300 s: last
    assert len(lines) == 5
    assert "job 5 priority 1750 -> 4990" in log_file.read_text()


def test_default_band_sits_above_priority_basic(fake_binaries, tmp_path, monkeypatch):
    """Under priority/basic Slurm's own values reach 4,294,901,759: the managed jobs go above."""
    log = tmp_path / "basic.log"
    install_fakes(tmp_path / "bin", monkeypatch, {"scontrol": fake_scontrol(log, "basic")})
    _invoke("slurm", "--policy", "fcfs", "--interval", "0.01", "--max-scans", "1")
    priorities = [int(line.rsplit("=", 1)[1]) for line in log.read_text().splitlines()]
    assert len(priorities) == 6 and min(priorities) > 4_294_901_759
    assert max(priorities) <= 4_294_967_293


def test_unreachable_controller_is_one_line_and_exit_2(
    fake_binaries, tmp_path, monkeypatch, capsys
):
    """A bounded wait with a message, then one line and exit 2: also with --until-idle, which
    used to retry forever."""
    down = fake_scontrol(fake_binaries, up=False)
    install_fakes(tmp_path / "bin", monkeypatch, {"scontrol": down})
    result = runner.invoke(
        typer_app, ["jobs", "slurm", "--policy", "sjf", "--connect-timeout-s", "0.3"]
    )
    assert isinstance(result.exception, SlurmUnreachableError)
    assert "slurmctld not answering" in result.output  # the message while it waits
    argv = ["hetsched", "jobs", "slurm", "--policy", "sjf", "--until-idle"]
    monkeypatch.setattr(sys, "argv", [*argv, "--connect-timeout-s", "0.3"])
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as exit_info:
        app()
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    (last,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert last == (
        "error: slurmctld unreachable for 0.3 s (Slurmctld(primary) at localhost is DOWN); is it"
        " running, and does SLURM_CONF point at it?"
    )


def test_slurm_dry_run_calls_no_scontrol(fake_binaries):
    result = _invoke(
        "slurm", "--policy", "fcfs", "--interval", "0.01", "--max-scans", "2", "--dry-run"
    )
    assert "2 scans, dry run, nothing applied" in result.output
    assert not fake_binaries.exists()


def test_slurm_rejects_an_unknown_policy():
    result = runner.invoke(typer_app, ["jobs", "slurm", "--policy", "nope", "--max-scans", "1"])
    assert isinstance(result.exception, UnknownNameError)
    assert "sjf" in str(result.exception)


def test_slurm_submit_dry_run_prints_sbatch_lines():
    result = _invoke(
        "slurm-submit", "--jobs", "5", "--seed", "2", "--arrival-span-s", "4", "--dry-run"
    )
    lines = [line for line in result.output.splitlines() if "sbatch" in line]
    assert len(lines) == 5
    assert lines[0].startswith("t=  0.000s sbatch --parsable")
    assert all("--gres=gpu:" in line and "--wrap=sleep" in line for line in lines)
    assert lines[-1].startswith("t=  4.000s")


def test_slurm_experiment_simulated(tmp_path):
    out = tmp_path / "exp"
    result = _invoke(
        "slurm-experiment", "--simulate-only", "--jobs", "12", "--policy", "sjf", "--out", str(out)
    )
    assert "makespan" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert [(r["arm"], r["mode"]) for r in payload["results"]] == [
        ("fifo", "simulated"),
        ("multifactor", "simulated"),
        ("hetsched", "simulated"),
    ]
    assert payload["settings"]["workload"]["jobs"] == 12
    assert len(payload["comparisons"]) == 6 and payload["summary"][0]["arm"] == "fifo"
    assert "within spread" in result.output or "gain" in result.output


@pytest.mark.parametrize("bad", ["4,x", "", "4,-1"])
def test_slurm_experiment_refuses_bad_node_gpus(bad):
    result = runner.invoke(
        typer_app, ["jobs", "slurm-experiment", "--simulate-only", "--node-gpus", bad]
    )
    assert "--node-gpus must be" in str(result.exception) or "GPUs >= 0" in str(result.exception)


def test_submit_and_experiment_share_the_workload_flags():
    """One option group serves both commands; only --jobs keeps its own help in each."""
    flags = ("--synthetic", "--trace", "--format", "--start", "--seed", "--arrival-span-s")
    submit = _invoke("slurm-submit", "--help").output
    experiment = _invoke("slurm-experiment", "--help").output
    assert all(flag in submit and flag in experiment for flag in flags)
    assert "Jobs to submit." in submit and "Jobs to submit." not in experiment
    assert "Jobs in the workload." in experiment


def test_slurm_experiment_on_a_trace_window_records_its_workload(fixtures, tmp_path):
    trace = fixtures / "tiny.swf"
    out = tmp_path / "exp"
    _invoke(
        "slurm-experiment", "--simulate-only", "--trace", str(trace), "--format", "swf",
        "--start", "1", "--jobs", "2", "--out", str(out),
    )  # fmt: skip
    workload = json.loads((out / "results.json").read_text())["settings"]["workload"]
    assert workload["synthetic"] is None  # --trace replaces the default profile
    assert workload["trace"] == str(trace) and workload["start"] == 1 and workload["jobs"] == 2
    result = runner.invoke(
        typer_app, ["jobs", "slurm-submit", "--trace", str(trace), "--start", "9"]
    )
    assert "--start 9 is outside the trace's 3 jobs" in str(result.exception)
