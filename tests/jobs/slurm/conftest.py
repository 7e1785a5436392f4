"""Fixtures of the live-Slurm tests: a fake command runner over captured 22.05 output, and a real
single-node Slurm with fake GPUs (module-scoped; every daemon stopped afterwards).

The JSON fixtures were captured from Slurm 22.05.8 (Debian 12) started by
:class:`hetsched.jobs.slurm.local.LocalSlurm`: ``squeue_22.05.json`` (pending jobs with and without
comments, an exclusive one, a held one, a GPU-less one, one running), ``sinfo_busy_22.05.json``
(the node with all 4 GPUs allocated) and ``squeue_completed_22.05.json`` (finished jobs).
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from hetsched.jobs.slurm.local import LocalSlurm, missing_requirements
from hetsched.jobs.slurm.local_config import LocalClusterSpec

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_fixture(name: str) -> dict:
    """A captured JSON fixture."""
    return json.loads((FIXTURES / name).read_text())


class FakeSlurm:
    """A :data:`~hetsched.jobs.slurm.client.Runner` that answers like Slurm 22.05 from records.

    ``squeue --json`` / ``sinfo --json`` print the current records; ``scontrol ping`` answers
    UP; ``scontrol show config`` prints ``config`` (a captured 22.05 one); ``scontrol update``
    changes the records; ``scontrol release`` puts back the priority the job had at
    construction; ``fail`` queues error messages per job id (each update of that job consumes
    one); with ``down`` set, every command fails as with the controller gone.

    Args:
        squeue: A captured ``squeue --json`` payload.
        sinfo: A captured ``sinfo --json`` payload.
    """

    def __init__(self, squeue: dict, sinfo: dict) -> None:
        self.squeue = copy.deepcopy(squeue)
        self.sinfo = copy.deepcopy(sinfo)
        self.calls: list[list[str]] = []
        self.fail: dict[int, list[str]] = {}
        self.config = (FIXTURES / "scontrol_show_config_multifactor_22.05.txt").read_text()
        self.down = False
        self.auto_priority = {j["job_id"]: j["priority"] for j in self._records()}

    def _records(self) -> list[dict]:
        return [j for j in self.squeue["jobs"] if isinstance(j, dict) and "job_id" in j]

    def job(self, job_id: int) -> dict:
        """The record of ``job_id``."""
        return next(j for j in self._records() if j["job_id"] == job_id)

    def remove(self, job_id: int) -> None:
        """The job leaves the controller (finished long ago)."""
        self.squeue["jobs"] = [
            j for j in self.squeue["jobs"] if j not in self._records() or j["job_id"] != job_id
        ]

    def _done(self, argv: Sequence[str], out: str = "", err: str = "", rc: int = 0):
        return subprocess.CompletedProcess(list(argv), rc, out, err)

    def __call__(self, argv: Sequence[str], timeout_s: float, env) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        if self.down and argv[0] in ("squeue", "sinfo"):
            return self._done(
                argv, err="Unable to contact slurm controller (connect failure)", rc=1
            )
        if list(argv) == ["squeue", "--json"]:
            return self._done(argv, json.dumps(self.squeue))
        if list(argv) == ["sinfo", "--json"]:
            return self._done(argv, json.dumps(self.sinfo))
        if argv[0] != "scontrol":
            raise AssertionError(f"unexpected command {argv}")
        if self.down:
            return self._done(argv, err="Slurmctld(primary) at localhost is DOWN", rc=1)
        if list(argv) == ["scontrol", "ping"]:
            return self._done(argv, "Slurmctld(primary) at localhost is UP\n")
        if list(argv) == ["scontrol", "show", "config"]:
            return self._done(argv, self.config)
        job_id = int(argv[2].split("=")[-1])
        if self.fail.get(job_id):
            return self._done(argv, err=self.fail[job_id].pop(0), rc=1)
        if not any(j["job_id"] == job_id for j in self._records()):
            return self._done(argv, err=f"Invalid job id specified for job {job_id}", rc=1)
        record = self.job(job_id)
        if argv[1] == "release":
            record["priority"] = self.auto_priority[job_id]
            return self._done(argv)
        key, value = argv[3].split("=")
        if key == "priority":
            record["priority"] = int(value)
        elif key == "oversubscribe":
            record["shared"] = "shared" if value == "yes" else "none"
        return self._done(argv)

    def updates(self) -> list[list[str]]:
        """The ``scontrol`` calls that change something, so far."""
        return [c for c in self.calls if c[0] == "scontrol" and c[1] in ("update", "release")]


@pytest.fixture
def fake_slurm() -> FakeSlurm:
    """Captured pending/running jobs on a node whose 4 GPUs are all busy."""
    return FakeSlurm(load_fixture("squeue_22.05.json"), load_fixture("sinfo_busy_22.05.json"))


@pytest.fixture(scope="module")
def local_slurm(tmp_path_factory) -> LocalSlurm:
    """A real Slurm 22.05 on localhost (4 fake GPUs, 4 CPUs); skips without Slurm or root."""
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm") / "cluster")
    slurm.start()
    try:
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture(scope="module")
def basic_slurm(tmp_path_factory) -> LocalSlurm:
    """The same cluster under priority/basic (Slurm's default, FIFO)."""
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    spec = LocalClusterSpec(priority_type="priority/basic")
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm") / "basic", spec)
    slurm.start()
    try:
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture(scope="module")
def multi_slurm(tmp_path_factory) -> LocalSlurm:
    """Four nodes on this host (Slurm's multiple-slurmd mode) with 4, 2, 2 and 1 GPUs."""
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    spec = LocalClusterSpec(node_gpus=(4, 2, 2, 1))
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm") / "multi", spec)
    slurm.start()
    try:
        yield slurm
    finally:
        slurm.stop()
