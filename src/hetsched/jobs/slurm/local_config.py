"""The text of a private Slurm's ``slurm.conf`` and ``gres.conf``: several nodes on one host.

Why several: the placement advice (section 3.1.2) only acts when a job has more than one way to
be placed, which one node never offers. Debian's Slurm 22.05 runs several ``slurmd`` on one host
(checked: ``NodeName=n1 NodeHostname=localhost Port=P1``, one ``slurmd -N n1`` per node, pid,
log and spool names with ``%n``), so a private cluster can have nodes with different GPU counts.

The controller runs as in the paper's section 5.6: ``sched/backfill``, ``select/cons_tres``, and
either ``priority/multifactor`` with equal weights (1000) on every factor or ``priority/basic``
(Slurm's default, FIFO). Under multifactor the age and fair-share factors stay 0 (seen with
``sprio``: fair share needs slurmdbd, and minutes of age are nothing against the default 7-day
``PriorityMaxAge``), so Slurm's own order comes from job size (CPUs; submitted jobs ask one CPU
per GPU) and, on ties, submission order. ``bf_interval=1`` and ``sched_interval=1`` scale
Slurm's scheduling passes (30 s backfill, 60 s main loop by default) to jobs of a few seconds;
without the latter a job whose begin time or dependency clears waits up to a minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import ConfigError

#: The priority plugins a local cluster can run.
PRIORITY_TYPES = ("priority/multifactor", "priority/basic")


@dataclass(frozen=True)
class LocalClusterSpec:
    """The shape of a private cluster.

    Attributes:
        node_gpus: Fake GPUs per node; nodes are named ``n1``, ``n2``, ...
        cpus: CPUs declared per node (``config_overrides``: may exceed the real count, so that
            GPUs, not this machine's cores, are the scarce resource).
        partition: Name of the one partition (all nodes).
        priority_type: ``priority/multifactor`` or ``priority/basic``.
    """

    node_gpus: tuple[int, ...] = (4,)
    cpus: int = 4
    partition: str = "debug"
    priority_type: str = "priority/multifactor"

    def __post_init__(self) -> None:
        if not self.node_gpus or min(self.node_gpus) < 0 or self.cpus < 1:
            raise ConfigError(f"need at least one node, GPUs >= 0 and CPUs >= 1, got {self}")
        if self.priority_type not in PRIORITY_TYPES:
            raise ConfigError(f"priority_type must be one of {PRIORITY_TYPES}, got {self}")

    @property
    def node_names(self) -> list[str]:
        """``n1`` .. ``nK``."""
        return [f"n{i}" for i in range(1, len(self.node_gpus) + 1)]

    @property
    def device_ranges(self) -> list[range]:
        """The global fake-GPU numbers of each node (``dev/gpu<k>``)."""
        ranges, first = [], 0
        for gpus in self.node_gpus:
            ranges.append(range(first, first + gpus))
            first += gpus
        return ranges


def slurm_conf_text(
    spec: LocalClusterSpec, root: Path, controller_port: int, node_ports: Sequence[int]
) -> str:
    """``slurm.conf`` for ``spec`` with every file under ``root`` and the given ports."""
    lines = [
        "ClusterName=hetsched-local",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={controller_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.sock'}",
        "CredType=cred/munge",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_interval=1,sched_interval=1",
        f"PriorityType={spec.priority_type}",
        *(
            f"PriorityWeight{factor}=1000"
            for factor in ("Age", "Fairshare", "JobSize", "Partition", "QOS")
            if spec.priority_type == "priority/multifactor"
        ),
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}/%n",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run'}/slurmd-%n.pid",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log'}/slurmd-%n.log",
        "GresTypes=gpu",
    ]
    for name, gpus, port in zip(spec.node_names, spec.node_gpus, node_ports, strict=True):
        gres = f" Gres=gpu:{gpus}" if gpus else ""
        lines.append(
            f"NodeName={name} NodeHostname=localhost Port={port} CPUs={spec.cpus}"
            f" RealMemory=20000{gres} State=UNKNOWN"
        )
    nodes = ",".join(spec.node_names)
    lines.append(
        f"PartitionName={spec.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def gres_conf_text(spec: LocalClusterSpec, root: Path) -> str:
    """``gres.conf``: each node's fake GPUs (character devices under ``root/dev``)."""
    lines = ["AutoDetect=off"]
    for name, devices in zip(spec.node_names, spec.device_ranges, strict=True):
        if len(devices):
            lines.append(
                f"NodeName={name} Name=gpu File={root / 'dev'}/gpu[{devices[0]}-{devices[-1]}]"
            )
    return "\n".join(lines) + "\n"
