"""Heterogeneous GPU clusters: nodes, where a job runs, and the immutable cluster.

A :class:`Cluster` is immutable: a list of :class:`Node` (GPU type and count, CPUs, memory, virtual
cluster) plus per-GPU-type speed factors. A job's run time in a trace is taken as measured on a
speed-1.0 GPU; on a type with speed ``s`` it runs ``run_time_s / s`` (RLTune's published simulator
ignored the GPU type entirely; here the type changes both placement and run time). The mutable
free resources are :class:`~hetsched.jobs.cluster.state.ClusterState`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hetsched.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Node:
    """One machine.

    Attributes:
        name: Unique node name.
        gpu_type: GPU model on this node ("" for a CPU-only node).
        num_gpus: GPUs on the node.
        cpus: CPU cores (``inf`` = not a constraint).
        memory_mib: Memory in MiB (``inf`` = not a constraint).
        virtual_cluster: Virtual cluster / partition the node belongs to (None = shared).
    """

    name: str
    gpu_type: str
    num_gpus: int
    cpus: float = math.inf
    memory_mib: float = math.inf
    virtual_cluster: str | None = None


@dataclass(frozen=True)
class Allocation:
    """Where one job runs: per-node GPUs, CPUs and memory (parallel arrays over ``node_indices``).

    A job spans nodes of a single GPU type (a distributed job runs at its slowest GPU's pace, so
    mixing types would only waste the faster ones).
    """

    node_indices: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    memory_mib: np.ndarray
    gpu_type: str

    @property
    def num_nodes(self) -> int:
        """Nodes the job spans."""
        return len(self.node_indices)

    def key(self) -> tuple[tuple[int, int], ...]:
        """(node, gpus) pairs, to compare placements."""
        return tuple(zip(self.node_indices.tolist(), self.gpus.tolist(), strict=True))


@dataclass
class Cluster:
    """An immutable set of nodes plus per-GPU-type speed factors.

    Args:
        nodes: The machines.
        speed_factors: GPU type -> relative speed (missing types run at 1.0).
        name: A label for tables and files.
    """

    nodes: Sequence[Node]
    speed_factors: dict[str, float] = field(default_factory=dict)
    name: str = "cluster"

    def __post_init__(self) -> None:
        self.nodes = tuple(self.nodes)
        if not self.nodes:
            raise ConfigError(f"cluster {self.name!r} has no nodes")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ConfigError(f"cluster {self.name!r} has duplicate node names")
        for node in self.nodes:
            if node.num_gpus < 0 or node.cpus <= 0 or node.memory_mib <= 0:
                raise ConfigError(f"node {node.name!r}: GPUs must be >= 0, CPUs and memory > 0")
        for gpu_type, speed in self.speed_factors.items():
            if not speed > 0:
                raise ConfigError(f"speed factor of {gpu_type!r} must be > 0, got {speed}")
        self.gpu_types: list[str] = sorted({n.gpu_type for n in self.nodes})
        type_code = {t: i for i, t in enumerate(self.gpu_types)}
        self.node_gpus = np.array([n.num_gpus for n in self.nodes], dtype=np.int64)
        self.node_cpus = np.array([n.cpus for n in self.nodes], dtype=np.float64)
        self.node_memory_mib = np.array([n.memory_mib for n in self.nodes], dtype=np.float64)
        self.node_type_code = np.array([type_code[n.gpu_type] for n in self.nodes], dtype=np.int64)
        self.virtual_clusters: list[str] = sorted(
            {n.virtual_cluster for n in self.nodes if n.virtual_cluster is not None}
        )
        vc_code = {v: i for i, v in enumerate(self.virtual_clusters)}
        self.node_vc_code = np.array(
            [-1 if n.virtual_cluster is None else vc_code[n.virtual_cluster] for n in self.nodes],
            dtype=np.int64,
        )
        self.type_speed = np.array(
            [float(self.speed_factors.get(t, 1.0)) for t in self.gpu_types], dtype=np.float64
        )

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole cluster."""
        return int(self.node_gpus.sum())

    def speed_of(self, gpu_type: str) -> float:
        """Speed factor of ``gpu_type`` (1.0 if not set)."""
        return float(self.speed_factors.get(gpu_type, 1.0))

    def type_mask(self, allowed: Iterable[str] | None) -> np.ndarray:
        """Boolean mask over nodes whose GPU type is in ``allowed`` (all nodes for None)."""
        if allowed is None:
            return np.ones(len(self.nodes), dtype=bool)
        codes = [i for i, t in enumerate(self.gpu_types) if t in set(allowed)]
        return np.isin(self.node_type_code, codes)

    def vc_mask(self, virtual_cluster: str | None) -> np.ndarray:
        """Boolean mask over nodes a job of ``virtual_cluster`` may use.

        A job without a VC, or a cluster without VCs, may use every node; otherwise only the
        nodes of that VC (an unknown VC gives an empty mask, which the simulator reports).
        """
        if virtual_cluster is None or not self.virtual_clusters:
            return np.ones(len(self.nodes), dtype=bool)
        if virtual_cluster not in self.virtual_clusters:
            return np.zeros(len(self.nodes), dtype=bool)
        return self.node_vc_code == self.virtual_clusters.index(virtual_cluster)

    def describe(self) -> dict[str, object]:
        """Summary for tables and JSON: nodes and GPUs per type, VCs, speed factors."""
        per_type = {
            t: {
                "nodes": int((self.node_type_code == i).sum()),
                "gpus": int(self.node_gpus[self.node_type_code == i].sum()),
                "speed": float(self.type_speed[i]),
            }
            for i, t in enumerate(self.gpu_types)
        }
        return {
            "name": self.name,
            "nodes": len(self.nodes),
            "gpus": self.total_gpus,
            "gpu_types": per_type,
            "virtual_clusters": self.virtual_clusters,
        }
