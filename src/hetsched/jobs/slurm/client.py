"""A thin client over Slurm's commands (``squeue``, ``sinfo``, ``scontrol``, ``sbatch``).

Why subprocess and not ``pyslurm``: no pyslurm release matches Slurm 22.05's API, while the
commands are stable and ``squeue --json`` / ``sinfo --json`` print machine-readable state. Every
call goes through one ``runner`` (``subprocess.run`` by default), so tests swap in a fake one and
check the exact command lines and the parsing of captured 22.05 output.

Every failure becomes a :class:`SlurmCommandError` naming the command and Slurm's message: a
missing binary names the Debian package to install, a call past ``timeout_s`` says so (a client
whose ``SLURM_CONF`` is unreadable retries for a minute before giving up).
"""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm.binaries import SYSTEM_DIRS, find_binary
from hetsched.jobs.slurm.records import SlurmJob, SlurmNode, load_records, parse_jobs, parse_nodes

#: Runs one command: (argv, timeout in s, environment) -> completed process with text output.
Runner = Callable[[Sequence[str], float, Mapping[str, str]], subprocess.CompletedProcess]

#: Fragments of ``scontrol`` messages meaning the job left the queue between scan and update.
JOB_GONE_MESSAGES = (
    "Invalid job id specified",
    "Job has already finished",
    "Job is no longer pending execution",
)


class SlurmCommandError(HetschedError):
    """A Slurm command is missing, timed out or exited non-zero.

    Args:
        argv: The command line.
        message: What went wrong (Slurm's stderr for a failed call).
        returncode: The exit status (None when the command did not run).
    """

    def __init__(self, argv: Sequence[str], message: str, returncode: int | None = None) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.message = message.strip()
        status = "" if returncode is None else f" (exit {returncode})"
        super().__init__(f"`{' '.join(self.argv)}` failed{status}: {self.message}")

    @property
    def job_gone(self) -> bool:
        """Whether Slurm said the job no longer exists or no longer waits."""
        return any(fragment in self.message for fragment in JOB_GONE_MESSAGES)


def subprocess_runner(
    argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
) -> subprocess.CompletedProcess:
    """Runs ``argv`` with captured text output (the default :data:`Runner`); the program is
    found by :func:`~hetsched.jobs.slurm.binaries.find_binary`, the same lookup the local
    daemons use.

    Raises:
        FileNotFoundError: If the program is nowhere to be found.
    """
    program = find_binary(argv[0])
    if program is None:
        raise FileNotFoundError(argv[0])
    return subprocess.run(
        [program, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(env),
        check=False,
    )


@dataclass(frozen=True)
class SubmitRequest:
    """One ``sbatch`` of a ``sleep`` job.

    Attributes:
        name: Job name.
        sleep_s: How long the job sleeps (its run time).
        num_gpus: GPUs (``--gres=gpu:k``); the job also asks one CPU per GPU so that Slurm's
            job-size factor, which counts CPUs, sees the GPU count.
        time_limit_s: Time limit; rounded up to whole minutes (Slurm's unit), at least 1.
        requested_time_s: Finer requested time, written to the comment for the adapter.
        partition: Partition, or None for the default one.
        oversubscribe: Submit with ``--oversubscribe`` (OverSubscribe=YES): lets the adapter's
            placement advice isolate the job and write YES back exactly (see
            :mod:`.oversubscribe`); on a partition with OverSubscribe=NO, Slurm's default, it
            changes nothing else.
    """

    name: str
    sleep_s: float
    num_gpus: int
    time_limit_s: float
    requested_time_s: float | None = None
    partition: str | None = None
    oversubscribe: bool = False

    def argv(self) -> list[str]:
        """The ``sbatch`` command line."""
        minutes = max(1, math.ceil(self.time_limit_s / 60.0))
        argv = ["sbatch", "--parsable", f"--job-name={self.name}", f"--time={minutes}"]
        argv += ["--output=/dev/null", f"--cpus-per-task={max(self.num_gpus, 1)}"]
        if self.num_gpus > 0:
            argv.append(f"--gres=gpu:{self.num_gpus}")
        if self.partition:
            argv.append(f"--partition={self.partition}")
        if self.oversubscribe:
            argv.append("--oversubscribe")
        if self.requested_time_s is not None:
            argv.append(f"--comment=hetsched:requested_s={self.requested_time_s:.3f}")
        argv.append(f"--wrap=sleep {self.sleep_s:.3f}")
        return argv


@dataclass
class SlurmClient:
    """Runs Slurm commands against one cluster.

    Args:
        slurm_conf: ``SLURM_CONF`` for the commands (None = the environment's / the default).
        runner: How commands run (tests pass a fake).
        timeout_s: Per-call limit.
    """

    slurm_conf: Path | None = None
    runner: Runner = subprocess_runner
    timeout_s: float = 30.0
    _env: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._env = dict(os.environ)
        if self.slurm_conf is not None:
            self._env["SLURM_CONF"] = str(self.slurm_conf)

    def run(self, argv: Sequence[str]) -> str:
        """Runs one command and returns its stdout.

        Raises:
            SlurmCommandError: The binary is missing, the call timed out or exited non-zero.
        """
        try:
            done = self.runner(argv, self.timeout_s, self._env)
        except FileNotFoundError:
            raise SlurmCommandError(
                argv,
                f"{argv[0]} not found on PATH nor in {', '.join(SYSTEM_DIRS)};"
                " install Slurm (Debian package slurm-wlm)",
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmCommandError(
                argv, f"no answer within {self.timeout_s:g} s (is slurmctld running?)"
            ) from None
        if done.returncode != 0:
            message = (done.stderr or "").strip() or (done.stdout or "").strip() or "no output"
            raise SlurmCommandError(argv, message, done.returncode)
        return done.stdout or ""

    # -- reads -------------------------------------------------------------------------------
    def job_records(self) -> list[Any]:
        """The raw, untrusted records of every job the controller knows (see
        :func:`~hetsched.jobs.slurm.records.select_job_records` and
        :func:`~hetsched.jobs.slurm.records.parse_jobs`)."""
        return load_records(self.run(["squeue", "--json"]), "squeue --json", "jobs")

    def node_records(self) -> list[Any]:
        """The raw, untrusted records of every node."""
        return load_records(self.run(["sinfo", "--json"]), "sinfo --json", "nodes")

    def ping(self) -> None:
        """``scontrol ping``: returns when the controller answers (it fails at once when not)."""
        self.run(["scontrol", "ping"])

    def show_config(self) -> str:
        """``scontrol show config``'s text (see
        :func:`~hetsched.jobs.slurm.priority_band.parse_show_config`)."""
        return self.run(["scontrol", "show", "config"])

    def jobs(self) -> list[SlurmJob]:
        """Every job that parses (pending, running, recently finished); comments not trusted."""
        return parse_jobs(self.job_records()).jobs

    def nodes(self) -> list[SlurmNode]:
        """Every node that parses, with its configured and allocated CPUs and GPUs."""
        return parse_nodes(self.node_records()).nodes

    # -- writes ------------------------------------------------------------------------------
    def set_priority(self, job_id: int, priority: int) -> None:
        """``scontrol update jobid=N priority=M`` (the paper's mechanism, section 3.1.2)."""
        self.run(["scontrol", "update", f"jobid={job_id}", f"priority={priority}"])

    def reset_priority(self, job_id: int) -> None:
        """Hands the job's priority back to Slurm's priority plugin.

        ``scontrol release`` clears the administrator-set priority and recomputes it (checked on
        22.05: the job gets its multifactor value back), which is a truer restore than writing
        back the number read at the first scan, since multifactor values change over time.
        """
        self.run(["scontrol", "release", str(job_id)])

    def set_oversubscribe(self, job_id: int, word: str) -> None:
        """``scontrol update jobid=N oversubscribe=yes|no`` (no = whole nodes, exclusive; the only
        two values scontrol can write, see :mod:`.oversubscribe`)."""
        if word not in ("yes", "no"):
            raise ValueError(f"oversubscribe must be yes or no, got {word!r}")
        self.run(["scontrol", "update", f"jobid={job_id}", f"oversubscribe={word}"])

    def submit(self, request: SubmitRequest) -> int:
        """Submits one job; returns its id."""
        out = self.run(request.argv()).strip()
        try:
            return int(out.split(";")[0])
        except ValueError:
            raise SlurmCommandError(request.argv(), f"unexpected sbatch output {out!r}") from None

    def cancel(self, job_ids: Sequence[int]) -> None:
        """``scancel`` the given jobs (nothing for an empty list)."""
        if job_ids:
            self.run(["scancel", *(str(j) for j in job_ids)])
