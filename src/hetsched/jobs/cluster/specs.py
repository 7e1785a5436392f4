"""Cluster files: a YAML list of node groups plus optional per-GPU-type speed factors."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field

from hetsched.core.config import StrictModel, load_config
from hetsched.core.errors import ConfigError
from hetsched.jobs.cluster.model import Cluster, Node


class NodeGroupSpec(StrictModel):
    """``count`` identical nodes (YAML)."""

    count: int = 1
    name_prefix: str = "node"
    gpu_type: str
    gpus_per_node: int
    cpus_per_node: float = math.inf
    memory_mib_per_node: float = math.inf
    virtual_cluster: str | None = None


class ClusterSpec(StrictModel):
    """A cluster file: node groups plus optional per-GPU-type speed factors.

    Example::

        name: small
        speed_factors: {V100: 1.0, P100: 0.6}
        node_groups:
          - {count: 2, gpu_type: V100, gpus_per_node: 8, cpus_per_node: 64,
             memory_mib_per_node: 262144, name_prefix: v100}
    """

    name: str = "cluster"
    speed_factors: dict[str, float] = Field(default_factory=dict)
    node_groups: list[NodeGroupSpec]


def cluster_from_spec(spec: ClusterSpec) -> Cluster:
    """Expands node groups into nodes named ``<prefix>-<i>``."""
    nodes: list[Node] = []
    for group in spec.node_groups:
        if group.count < 1 or group.gpus_per_node < 0:
            raise ConfigError(f"node group {group.name_prefix!r}: count must be >= 1 and GPUs >= 0")
        for _ in range(group.count):
            nodes.append(
                Node(
                    name=f"{group.name_prefix}-{len(nodes)}",
                    gpu_type=group.gpu_type,
                    num_gpus=group.gpus_per_node,
                    cpus=group.cpus_per_node,
                    memory_mib=group.memory_mib_per_node,
                    virtual_cluster=group.virtual_cluster,
                )
            )
    return Cluster(nodes, dict(spec.speed_factors), spec.name)


def load_cluster(path: str | Path) -> Cluster:
    """Reads a cluster YAML file (see :class:`ClusterSpec`)."""
    return cluster_from_spec(load_config(path, ClusterSpec))
