"""A private single-node Slurm 22.05 with fake GPUs, for tests and the scaled experiment.

Everything lives in one folder: ``slurm.conf``, ``gres.conf``, state, logs, pid files, the fake
GPU character devices, and a munged of its own (own socket and pid file, the key copied from
``/etc/munge/munge.key``), so it neither needs nor disturbs a system munged or Slurm. Daemons
listen on free localhost ports and are stopped by the pids in their pid files.

The controller runs as in the paper's section 5.6: ``sched/backfill``, ``select/cons_tres``,
``priority/multifactor`` with equal weights (1000) on every factor. The age and fair-share
factors stay 0 (seen with ``sprio``: fair share needs slurmdbd, and minutes of age are nothing
against the default 7-day ``PriorityMaxAge``), so Slurm's own order comes from job size (CPUs;
submitted jobs ask one CPU per GPU) and, on ties, submission order. ``bf_interval=1`` lets the
backfill pass keep up with jobs of a few seconds.

Needs root (daemons, ``mknod``) and the Debian packages ``slurm-wlm`` and ``munge``;
:func:`missing_requirements` says which is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError

SBIN_PATH = "/usr/sbin:/usr/local/sbin:/usr/bin:/usr/local/bin"
MUNGE_KEY = Path("/etc/munge/munge.key")


def _binary(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN_PATH)


def missing_requirements() -> str | None:
    """Why a local Slurm cannot start here (None when it can); names the package to install."""
    missing = [name for name in ("slurmctld", "slurmd", "sbatch") if _binary(name) is None]
    if missing:
        return f"{', '.join(missing)} not found: install the Debian package slurm-wlm"
    munge_missing = f"munged or {MUNGE_KEY} not found: install the Debian package munge"
    if _binary("munged") is None:
        return munge_missing
    try:
        key_present = MUNGE_KEY.exists()
    except PermissionError:
        # /etc/munge is 0700 root: an unprivileged user cannot even look, and could not
        # start the daemons either.
        return f"{MUNGE_KEY} is not readable by this user: a local Slurm needs root"
    if not key_present:
        return munge_missing
    if os.geteuid() != 0:
        return "a local Slurm needs root (daemons and mknod for the fake GPUs)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left by a parent that does not reap counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class LocalSlurm:
    """Starts and stops munged, slurmctld and slurmd on localhost in ``root``.

    Args:
        root: Folder for every file (created).
        gpus: Fake GPUs on the node.
        cpus: CPUs declared for the node (``config_overrides``: may exceed the real count, so
            that GPUs, not this machine's cores, are the scarce resource).
        partition: Name of the one partition.
    """

    def __init__(self, root: Path, gpus: int = 4, cpus: int = 4, partition: str = "debug") -> None:
        self.root = Path(root)
        self.gpus = gpus
        self.cpus = cpus
        self.partition = partition
        self.conf = self.root / "slurm.conf"
        self._pid_files = [
            self.root / "run" / "slurmd.pid",
            self.root / "run" / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]

    def client(self) -> SlurmClient:
        """A client bound to this cluster's ``slurm.conf``."""
        return SlurmClient(slurm_conf=self.conf)

    def _write_config(self) -> None:
        r = self.root
        for sub in ("state", "spool", "run", "log", "dev", "munge"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        r.chmod(0o755)
        (r / "munge").chmod(0o700)
        key = r / "munge" / "munge.key"
        shutil.copyfile(MUNGE_KEY, key)
        key.chmod(0o600)
        for i in range(self.gpus):
            device = r / "dev" / f"gpu{i}"
            if not device.exists():
                os.mknod(
                    device, 0o666 | 0o020000, os.makedev(1, 3)
                )  # a char device, like /dev/null
        lines = [
            "ClusterName=hetsched-local",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={r / 'munge' / 'munge.sock'}",
            "CredType=cred/munge",
            "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=1",
            "PriorityType=priority/multifactor",
            *(
                f"PriorityWeight{factor}=1000"
                for factor in ("Age", "Fairshare", "JobSize", "Partition", "QOS")
            ),
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "GresTypes=gpu",
            f"NodeName=localhost CPUs={self.cpus} RealMemory=20000 Gres=gpu:{self.gpus}"
            " State=UNKNOWN",
            f"PartitionName={self.partition} Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        last = self.gpus - 1
        (r / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName=localhost Name=gpu File={r / 'dev'}/gpu[0-{last}]\n"
        )

    def start(self, timeout_s: float = 30.0) -> None:
        """Writes the configuration, starts the three daemons and waits for an idle node.

        Raises:
            HetschedError: If a requirement is missing or the node is not idle in time (the
                message points at the log folder).
        """
        reason = missing_requirements()
        if reason is not None:
            raise HetschedError(f"cannot start a local Slurm: {reason}")
        self._write_config()
        m = self.root / "munge"
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        commands = [
            [
                _binary("munged"),
                "--force",
                f"--socket={m / 'munge.sock'}",
                f"--key-file={m / 'munge.key'}",
                f"--log-file={m / 'munged.log'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
            [_binary("slurmctld"), "-f", str(self.conf)],
            [_binary("slurmd"), "-f", str(self.conf), "-N", "localhost"],
        ]
        try:
            for argv in commands:
                done = subprocess.run(
                    [str(a) for a in argv], env=env, capture_output=True, text=True, check=False
                )
                if done.returncode != 0:
                    raise HetschedError(
                        f"{argv[0]} did not start: {done.stderr.strip()} (logs in {self.root})"
                    )
            self._wait_idle(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_idle(self, timeout_s: float) -> None:
        client = SlurmClient(slurm_conf=self.conf, timeout_s=5.0)
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                nodes = client.nodes()
                if nodes and all(n.state == "idle" for n in nodes):
                    return
                last = ", ".join(f"{n.name}={n.state}" for n in nodes)
            except SlurmCommandError as error:
                last = str(error)
            time.sleep(0.2)
        raise HetschedError(
            f"local Slurm not idle after {timeout_s:g} s ({last}); logs in {self.root / 'log'}"
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stops every daemon this instance started (SIGTERM, then SIGKILL after ``timeout_s``)."""
        pids = []
        for pid_file in self._pid_files:
            try:
                pids.append(int(pid_file.read_text().strip()))
            except (FileNotFoundError, ValueError):
                continue
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for pid_file in self._pid_files:
            pid_file.unlink(missing_ok=True)

    def __enter__(self) -> LocalSlurm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
