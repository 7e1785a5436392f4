"""A private Slurm 22.05 on localhost, one or several nodes with fake GPUs, for tests and the
scaled experiment.

Everything lives in one folder: ``slurm.conf`` and ``gres.conf`` (:mod:`.local_config`), state,
logs, pid files, the fake GPU character devices, and a munged of its own (own socket and pid
file, the key copied from ``/etc/munge/munge.key``), so it neither needs nor disturbs a system
munged or Slurm. Daemons (one ``slurmd`` per node) listen on free localhost ports and are stopped
by the pids in their pid files.

The daemons run as root and trust that folder, so it must be private (see :mod:`.private_dir`):
:class:`LocalSlurm` creates it itself with mode 0700 under parents no other user can rename
entries in, refuses a folder that already exists (whoever made it), and writes the key and the
configuration with ``O_EXCL`` and mode 0600.

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
from hetsched.jobs.slurm.local_config import LocalClusterSpec, gres_conf_text, slurm_conf_text
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


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _stop_pids(pids: list[int | None], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL what still runs after ``timeout_s`` (0: SIGKILL at once)."""
    alive = [p for p in pids if p is not None and _alive(p)]
    if timeout_s > 0:
        for pid in alive:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(_alive(p) for p in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
    for pid in alive:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(_alive(p) for p in alive) and time.monotonic() < deadline:
        time.sleep(0.02)


class LocalSlurm:
    """Starts and stops munged, slurmctld and one slurmd per node on localhost in ``root``.

    Args:
        root: Folder for every file; must not exist yet (:meth:`start` creates it, private).
        spec: Nodes, GPUs, CPUs, partition and priority plugin.
    """

    def __init__(self, root: Path, spec: LocalClusterSpec | None = None) -> None:
        self.root = Path(root)
        self.spec = spec or LocalClusterSpec()
        self._created = False

    @property
    def conf(self) -> Path:
        """This cluster's ``slurm.conf``."""
        return self.root / "slurm.conf"

    @property
    def _controller_pid_file(self) -> Path:
        return self.root / "run" / "slurmctld.pid"

    @property
    def _pid_files(self) -> list[Path]:
        run = self.root / "run"
        nodes = [run / f"slurmd-{name}.pid" for name in self.spec.node_names]
        return [*nodes, self._controller_pid_file, self.root / "munge" / "munged.pid"]

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
        for name in self.spec.node_names:
            os.mkdir(r / "spool" / name, 0o700)
        write_private_file(r / "munge" / "munge.key", MUNGE_KEY.read_bytes())
        for devices in self.spec.device_ranges:
            for k in devices:
                # A character device like /dev/null: gres.conf's File= must name one.
                os.mknod(r / "dev" / f"gpu{k}", 0o600 | 0o020000, os.makedev(1, 3))
        ports = [_free_port() for _ in range(len(self.spec.node_gpus) + 1)]
        conf = slurm_conf_text(self.spec, r, ports[0], ports[1:])
        write_private_file(self.conf, conf.encode())
        write_private_file(r / "gres.conf", gres_conf_text(self.spec, r).encode())

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
            self._controller_argv(),
            *(
                [find_binary("slurmd"), "-f", str(self.conf), "-N", name]
                for name in self.spec.node_names
            ),
        ]
        try:
            for argv in commands:
                self._launch(argv)
            self._wait_idle(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _controller_argv(self) -> list[str | None]:
        return [find_binary("slurmctld"), "-f", str(self.conf)]

    def _launch(self, argv: list[str | None]) -> None:
        """Runs one daemon (each forks into the background and writes its pid file)."""
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        done = subprocess.run(
            [str(a) for a in argv], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise HetschedError(
                f"{argv[0]} did not start: {done.stderr.strip()} (logs in {self.root})"
            )

    def restart_controller(self, timeout_s: float = 10.0) -> None:
        """Stops slurmctld (SIGTERM: it saves its state, as ``systemctl restart`` would) and
        starts it again; it recovers its jobs from the state folder. For testing that clients
        ride out a restart. (After a SIGKILL, 22.05 loses jobs submitted in the last seconds:
        their state was not saved yet.)"""
        _stop_pids([_read_pid(self._controller_pid_file)], timeout_s)
        self._controller_pid_file.unlink(missing_ok=True)
        self._launch(self._controller_argv())

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
        _stop_pids([_read_pid(f) for f in self._pid_files], timeout_s)
        for pid_file in self._pid_files:
            pid_file.unlink(missing_ok=True)

    def __enter__(self) -> LocalSlurm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
