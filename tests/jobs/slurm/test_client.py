"""The Slurm client: exact command lines, errors that name the problem, sbatch requests."""

from __future__ import annotations

import subprocess

import pytest

from hetsched.jobs.slurm import binaries
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError, SubmitRequest


class Recorder:
    """Answers every command with one fixed result and records the calls."""

    def __init__(self, rc: int = 0, out: str = "", err: str = "", raises=None) -> None:
        self.rc, self.out, self.err, self.raises = rc, out, err, raises
        self.calls = []

    def __call__(self, argv, timeout_s, env):
        self.calls.append((list(argv), timeout_s, env.get("SLURM_CONF")))
        if self.raises is not None:
            raise self.raises
        return subprocess.CompletedProcess(list(argv), self.rc, self.out, self.err)


def test_updates_are_the_documented_scontrol_lines(tmp_path):
    runner = Recorder()
    client = SlurmClient(slurm_conf=tmp_path / "slurm.conf", runner=runner, timeout_s=7.0)
    client.set_priority(12, 3400)
    client.set_oversubscribe(12, "no")
    client.set_oversubscribe(12, "yes")
    with pytest.raises(ValueError, match="yes or no"):
        client.set_oversubscribe(12, "ok")
    client.reset_priority(12)
    client.cancel([1, 2])
    client.cancel([])
    argvs = [c[0] for c in runner.calls]
    assert argvs == [
        ["scontrol", "update", "jobid=12", "priority=3400"],
        ["scontrol", "update", "jobid=12", "oversubscribe=no"],
        ["scontrol", "update", "jobid=12", "oversubscribe=yes"],
        ["scontrol", "release", "12"],
        ["scancel", "1", "2"],
    ]
    assert {c[1] for c in runner.calls} == {7.0}
    assert {c[2] for c in runner.calls} == {str(tmp_path / "slurm.conf")}


def test_failed_call_carries_slurms_message():
    runner = Recorder(rc=1, err="Job has already finished for job 9\n")
    with pytest.raises(SlurmCommandError) as info:
        SlurmClient(runner=runner).set_priority(9, 10)
    error = info.value
    assert error.returncode == 1 and error.job_gone
    assert "scontrol update jobid=9 priority=10" in str(error)
    assert "Job has already finished" in str(error)
    other = SlurmCommandError(["scontrol"], "Unable to contact slurm controller", 1)
    assert not other.job_gone


def test_missing_binary_names_the_package():
    runner = Recorder(raises=FileNotFoundError("squeue"))
    with pytest.raises(SlurmCommandError, match="slurm-wlm"):
        SlurmClient(runner=runner).jobs()


def test_missing_binary_with_the_real_runner(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no squeue anywhere
    monkeypatch.setattr(binaries, "SYSTEM_DIRS", ())
    with pytest.raises(SlurmCommandError, match="squeue not found on PATH"):
        SlurmClient().jobs()


def test_client_finds_programs_off_path_like_the_daemons(tmp_path, monkeypatch):
    """Slurm off PATH but in a system folder: the client runs it from there (one lookup)."""
    system = tmp_path / "sbin"
    system.mkdir()
    squeue = system / "squeue"
    squeue.write_text("#!/bin/sh\necho '{\"jobs\": []}'\n")
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(binaries, "SYSTEM_DIRS", (str(system),))
    assert binaries.find_binary("squeue") == str(squeue)
    assert SlurmClient().jobs() == []


def test_timeout_says_so():
    runner = Recorder(raises=subprocess.TimeoutExpired(["squeue"], 3.0))
    with pytest.raises(SlurmCommandError, match="no answer within 3 s"):
        SlurmClient(runner=runner, timeout_s=3.0).jobs()


def test_submit_request_line():
    request = SubmitRequest(
        "hs-7",
        sleep_s=4.25,
        num_gpus=2,
        time_limit_s=61.0,
        requested_time_s=9.5,
        partition="gpu",
        oversubscribe=True,
    )
    assert request.argv() == [
        "sbatch",
        "--parsable",
        "--job-name=hs-7",
        "--time=2",
        "--output=/dev/null",
        "--cpus-per-task=2",
        "--gres=gpu:2",
        "--partition=gpu",
        "--oversubscribe",
        "--comment=hetsched:requested_s=9.500",
        "--wrap=sleep 4.250",
    ]
    cpu_only = SubmitRequest("c", sleep_s=1.0, num_gpus=0, time_limit_s=5.0).argv()
    assert "--time=1" in cpu_only and not any(a.startswith("--gres") for a in cpu_only)
    assert "--oversubscribe" not in cpu_only


def test_submit_parses_the_job_id():
    assert SlurmClient(runner=Recorder(out="42\n")).submit(SubmitRequest("a", 1, 1, 60)) == 42
    assert (
        SlurmClient(runner=Recorder(out="43;cluster\n")).submit(SubmitRequest("a", 1, 1, 60)) == 43
    )
    with pytest.raises(SlurmCommandError, match="unexpected sbatch output"):
        SlurmClient(runner=Recorder(out="Submitted")).submit(SubmitRequest("a", 1, 1, 60))
