"""A private single-node Slurm 22.05 with fake GPUs, for tests and the scaled experiment.

Everything lives in one folder: ``slurm.conf``, ``gres.conf``, state, logs, pid files, the fake
GPU character devices, and a munged of its own (own socket and pid file, the key copied from
``/etc/munge/munge.key``), so it neither needs nor disturbs a system munged or Slurm. Daemons
listen on free localhost ports and are stopped by the pids in their pid files.

The daemons run as root and trust that folder, so it must be private (see :mod:`.private_dir`):
:class:`LocalSlurm` creates it itself with mode 0700 under parents no other user can rename
entries in, refuses a folder that already exists (whoever made it), and writes the key and the
configuration with ``O_EXCL`` and mode 0600.

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
import signal
import socket
import subprocess
import time
from pathlib import Path

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm.binaries import find_binary
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError
from hetsched.jobs.slurm.private_dir import (
    check_new_private_dir,
    create_private_dir,
    write_private_file,
)

MUNGE_KEY = Path("/etc/munge/munge.key")
#: Slurm programs a local cluster and its client need (all from the Debian package slurm-wlm).
SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")


def missing_requirements() -> str | None:
    """Why a local Slurm cannot start here (None when it can); names the package to install."""
    missing = [name for name in SLURM_PROGRAMS if find_binary(name) is None]
    if missing:
        return f"{', '.join(missing)} not found: install the Debian package slurm-wlm"
    munge_missing = f"munged or {MUNGE_KEY} not found: install the Debian package munge"
    if find_binary("munged") is None:
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
        root: Folder for every file; must not exist yet (:meth:`start` creates it, private).
        gpus: Fake GPUs on the node.
        cpus: CPUs declared for the node (``config_overrides``: may exceed the real count, so
            that GPUs, not this machine's cores, are the scarce resource).
        partition: Name of the one partition.
    """

    def __init__(
        self,
        root: Path,
        gpus: int = 4,
        cpus: int = 4,
        partition: str = "debug",
        priority_type: str = "priority/multifactor",
    ) -> None:
        self.root = Path(root)
        self.gpus = gpus
        self.cpus = cpus
        self.partition = partition
        self.priority_type = priority_type
        self._created = False

    @property
    def conf(self) -> Path:
        """This cluster's ``slurm.conf``."""
        return self.root / "slurm.conf"

    @property
    def _pid_files(self) -> list[Path]:
        return [
            self.root / "run" / "slurmd.pid",
            self.root / "run" / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]

    def client(self) -> SlurmClient:
        """A client bound to this cluster's ``slurm.conf``."""
        return SlurmClient(slurm_conf=self.conf)

    def _create_root(self) -> None:
        """The private folder, its sub-folders, the key copy and the configuration (once)."""
        self.root = create_private_dir(self.root)
        self._created = True
        r = self.root
        for sub in ("state", "spool", "run", "log", "dev", "munge"):
            os.mkdir(r / sub, 0o700)
        write_private_file(r / "munge" / "munge.key", MUNGE_KEY.read_bytes())
        for i in range(self.gpus):
            # A character device like /dev/null: gres.conf's File= must name one.
            os.mknod(r / "dev" / f"gpu{i}", 0o600 | 0o020000, os.makedev(1, 3))
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
            f"PriorityType={self.priority_type}",
            *(
                f"PriorityWeight{factor}=1000"
                for factor in ("Age", "Fairshare", "JobSize", "Partition", "QOS")
                if self.priority_type == "priority/multifactor"
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
        write_private_file(self.conf, ("\n".join(lines) + "\n").encode())
        last = self.gpus - 1
        gres = f"AutoDetect=off\nNodeName=localhost Name=gpu File={r / 'dev'}/gpu[0-{last}]\n"
        write_private_file(r / "gres.conf", gres.encode())

    def start(self, timeout_s: float = 30.0) -> None:
        """Creates the private folder (first start only), starts the three daemons and waits for
        an idle node.

        Raises:
            HetschedError: If the folder exists already or sits under an unsafe parent, a
                requirement is missing, or the node is not idle in time (the message points at
                the log folder).
        """
        if not self._created:
            check_new_private_dir(self.root)  # before anything else: the clearest refusal
            reason = missing_requirements()
            if reason is not None:
                raise HetschedError(f"cannot start a local Slurm: {reason}")
            self._create_root()
        m = self.root / "munge"
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        commands = [
            [
                find_binary("munged"),
                "--force",
                f"--socket={m / 'munge.sock'}",
                f"--key-file={m / 'munge.key'}",
                f"--log-file={m / 'munged.log'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
            [find_binary("slurmctld"), "-f", str(self.conf)],
            [find_binary("slurmd"), "-f", str(self.conf), "-N", "localhost"],
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
