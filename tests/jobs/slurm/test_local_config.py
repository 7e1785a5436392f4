"""The private cluster's configuration text: several nodes on one host, each with its own port,
pid/log/spool names and fake GPUs; a node without GPUs has no gres line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import ConfigError
from hetsched.jobs.slurm.local_config import LocalClusterSpec, gres_conf_text, slurm_conf_text

ROOT = Path("/srv/slurm")


def test_several_nodes_on_one_host():
    spec = LocalClusterSpec(node_gpus=(4, 2, 0), cpus=8, partition="gpu")
    text = slurm_conf_text(spec, ROOT, 7000, [7001, 7002, 7003])
    lines = text.splitlines()
    assert "SlurmctldPort=7000" in lines
    assert [line for line in lines if line.startswith("NodeName=")] == [
        "NodeName=n1 NodeHostname=localhost Port=7001 CPUs=8 RealMemory=20000 Gres=gpu:4"
        " State=UNKNOWN",
        "NodeName=n2 NodeHostname=localhost Port=7002 CPUs=8 RealMemory=20000 Gres=gpu:2"
        " State=UNKNOWN",
        "NodeName=n3 NodeHostname=localhost Port=7003 CPUs=8 RealMemory=20000 State=UNKNOWN",
    ]
    assert "PartitionName=gpu Nodes=n1,n2,n3 Default=YES MaxTime=INFINITE State=UP" in lines
    assert "SlurmdPidFile=/srv/slurm/run/slurmd-%n.pid" in lines
    assert "SlurmdSpoolDir=/srv/slurm/spool/%n" in lines
    assert gres_conf_text(spec, ROOT).splitlines() == [
        "AutoDetect=off",
        "NodeName=n1 Name=gpu File=/srv/slurm/dev/gpu[0-3]",
        "NodeName=n2 Name=gpu File=/srv/slurm/dev/gpu[4-5]",
    ]


def test_priority_plugins():
    multifactor = slurm_conf_text(LocalClusterSpec(), ROOT, 1, [2])
    basic = slurm_conf_text(LocalClusterSpec(priority_type="priority/basic"), ROOT, 1, [2])
    assert "PriorityType=priority/multifactor" in multifactor
    assert multifactor.count("PriorityWeight") == 5
    assert "PriorityType=priority/basic" in basic and "PriorityWeight" not in basic


@pytest.mark.parametrize(
    "kwargs",
    [
        {"node_gpus": ()},
        {"node_gpus": (2, -1)},
        {"cpus": 0},
        {"priority_type": "priority/fifo"},
    ],
)
def test_bad_specs_are_refused(kwargs):
    with pytest.raises(ConfigError):
        LocalClusterSpec(**kwargs)
