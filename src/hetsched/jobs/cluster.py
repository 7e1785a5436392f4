"""Heterogeneous GPU clusters: nodes, specs (YAML or from a trace) and the free-resource state.

A :class:`Cluster` is immutable: a list of :class:`Node` (GPU type and count, CPUs, memory, virtual
cluster) plus per-GPU-type speed factors. A job's run time in a trace is taken as measured on a
speed-1.0 GPU; on a type with speed ``s`` it runs ``run_time_s / s`` (RLTune's published simulator
ignored the GPU type entirely; here the type changes both placement and run time).

:class:`ClusterState` is the mutable part the simulator and placers share: free GPUs, CPUs and
memory per node, with allocation and release that refuse to over-allocate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field

from hetsched.core.config import StrictModel, load_config
from hetsched.core.errors import ConfigError, HetschedError
from hetsched.core.registry import Registry


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


class ClusterState:
    """Free GPUs, CPUs and memory per node; allocation refuses to over-allocate.

    Args:
        cluster: The cluster whose nodes start fully free.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free_gpus = cluster.node_gpus.copy()
        self.free_cpus = cluster.node_cpus.copy()
        self.free_memory_mib = cluster.node_memory_mib.copy()

    def copy(self) -> ClusterState:
        """An independent copy (for look-ahead: EASY reservations, candidate placements)."""
        other = ClusterState.__new__(ClusterState)
        other.cluster = self.cluster
        other.free_gpus = self.free_gpus.copy()
        other.free_cpus = self.free_cpus.copy()
        other.free_memory_mib = self.free_memory_mib.copy()
        return other

    @property
    def busy_gpus(self) -> int:
        """GPUs allocated right now."""
        return int(self.cluster.node_gpus.sum() - self.free_gpus.sum())

    def fits(self, allocation: Allocation) -> bool:
        """Whether ``allocation`` fits in the free resources now."""
        idx = allocation.node_indices
        # A tiny tolerance absorbs float error from splitting CPUs/memory across nodes.
        return bool(
            np.all(self.free_gpus[idx] >= allocation.gpus)
            and np.all(self.free_cpus[idx] >= allocation.cpus - 1e-9)
            and np.all(self.free_memory_mib[idx] >= allocation.memory_mib - 1e-9)
        )

    def allocate(self, allocation: Allocation) -> None:
        """Takes ``allocation``'s resources.

        Raises:
            RuntimeError: If any node would go below zero (a placer bug, never a user error).
        """
        if not self.fits(allocation):
            raise RuntimeError(f"allocation {allocation.key()} over-allocates a node")
        idx = allocation.node_indices
        self.free_gpus[idx] -= allocation.gpus
        self.free_cpus[idx] -= allocation.cpus
        self.free_memory_mib[idx] -= allocation.memory_mib

    def release(self, allocation: Allocation) -> None:
        """Returns ``allocation``'s resources.

        Raises:
            RuntimeError: If a node would exceed its capacity (a double release).
        """
        self.release_all([allocation])

    def release_all(self, allocations: Sequence[Allocation]) -> None:
        """Returns several allocations at once (one vectorised update; EASY look-ahead uses it).

        Raises:
            RuntimeError: If a node would exceed its capacity (a double release).
        """
        if not allocations:
            return
        if len(allocations) == 1:
            a = allocations[0]
            idx, gpus, cpus, memory = a.node_indices, a.gpus, a.cpus, a.memory_mib
        else:
            idx = np.concatenate([a.node_indices for a in allocations])
            gpus = np.concatenate([a.gpus for a in allocations])
            cpus = np.concatenate([a.cpus for a in allocations])
            memory = np.concatenate([a.memory_mib for a in allocations])
        np.add.at(self.free_gpus, idx, gpus)
        np.add.at(self.free_cpus, idx, cpus)
        np.add.at(self.free_memory_mib, idx, memory)
        if np.any(self.free_gpus[idx] > self.cluster.node_gpus[idx]):
            raise RuntimeError("an allocation was released twice")


# -- cluster specs -----------------------------------------------------------------------------
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


# -- built-in clusters ---------------------------------------------------------------------------
#: Named clusters for the CLI's ``--cluster`` (a YAML path works too).
CLUSTERS: Registry = Registry("cluster")

#: Relative training throughput per GPU type, a rough order from public DL benchmarks (V100 = 1).
#: Used only when speed factors are switched on; P100 ~ half a V100, T4 ~ 0.4, and so on.
DEFAULT_SPEED_FACTORS: dict[str, float] = {
    "V100": 1.0,
    "V100M16": 1.0,
    "V100M32": 1.0,
    "V100_16GB": 1.0,
    "V100_32GB": 1.0,
    "P100": 0.55,
    "T4": 0.4,
    "MISC": 0.5,
    "A10": 0.9,
    "G2": 0.9,
    "G3": 1.2,
    "K80": 0.25,
    "M40": 0.3,
}


def homogeneous_pool(num_slots: int, gpu_type: str = "slot") -> Cluster:
    """One node with ``num_slots`` GPU slots and no CPU/memory limit.

    The mapping used for CPU traces such as ``lublin_256.swf``: each processor is one slot in a
    single pool, so any job of <= ``num_slots`` processors fits once enough slots are free (no
    fragmentation across nodes, as in RLScheduler's simulator).
    """
    return Cluster([Node("pool", gpu_type, num_slots)], name=f"pool{num_slots}")


@CLUSTERS.register("helios")
def helios_cluster() -> Cluster:
    """The paper's Helios slice (section 4.2): VC1-VC5 with 16, 12, 10, 8, 8 nodes of 8 V100."""
    nodes = []
    for vc_index, count in enumerate((16, 12, 10, 8, 8), start=1):
        for i in range(count):
            nodes.append(Node(f"vc{vc_index}-{i}", "V100", 8, 48.0, 376_832.0, f"vc{vc_index}"))
    return Cluster(nodes, name="helios")


@CLUSTERS.register("philly")
def philly_cluster() -> Cluster:
    """Philly as Table 4 describes it: 552 P100 servers, 2490 GPUs, in a 2-GPU and an 8-GPU pool
    (321 x 2 + 231 x 8). The pools are told apart by type name (``P100x2``/``P100x8``)."""
    nodes = [Node(f"p2-{i}", "P100x2", 2, 24.0, 131_072.0) for i in range(321)]
    nodes += [Node(f"p8-{i}", "P100x8", 8, 48.0, 491_520.0) for i in range(231)]
    return Cluster(nodes, name="philly")


@CLUSTERS.register("alibaba")
def alibaba_cluster() -> Cluster:
    """A 672-GPU slice of the PAI 2020 fleet with its five GPU types (Table 4), named as RLTune's
    CSV codes them: 8-GPU V100_16GB / V100_32GB / P100 / MISC servers and 2-GPU T4 servers, sized
    so the synthetic Alibaba arrival rate loads it to roughly 80 %."""
    groups = (
        ("V100_16GB", 8, 24),
        ("V100_32GB", 8, 12),
        ("P100", 8, 16),
        ("T4", 2, 80),
        ("MISC", 8, 12),
    )
    nodes = []
    for gpu_type, gpus, count in groups:
        nodes += [
            Node(f"{gpu_type.lower()}-{i}", gpu_type, gpus, 96.0, 512 * 1024.0)
            for i in range(count)
        ]
    return Cluster(nodes, name="alibaba")


@CLUSTERS.register("rltune-synthetic")
def rltune_synthetic_cluster() -> Cluster:
    """A cluster for RLTune's synthetic CSV: its five GPU types, four 8-GPU nodes each."""
    nodes = []
    for gpu_type in ("T4", "MISC", "P100", "V100_16GB", "V100_32GB"):
        nodes += [Node(f"{gpu_type.lower()}-{i}", gpu_type, 8, 64.0, 262_144.0) for i in range(4)]
    return Cluster(nodes, name="rltune-synthetic")


def with_speed_factors(cluster: Cluster, factors: dict[str, float] | None = None) -> Cluster:
    """The same nodes with speed factors (``DEFAULT_SPEED_FACTORS`` for None)."""
    factors = DEFAULT_SPEED_FACTORS if factors is None else factors
    chosen = {t: factors[t] for t in cluster.gpu_types if t in factors}
    return Cluster(cluster.nodes, chosen, cluster.name)


def map_virtual_clusters(
    jobs_vc: np.ndarray, gpu_seconds: np.ndarray, cluster: Cluster
) -> dict[str, str]:
    """Maps a trace's virtual clusters onto ``cluster``'s, for replaying e.g. real Helios VCs on
    the paper's VC1-VC5 slice.

    Trace VCs are ranked by GPU-seconds demanded, cluster VCs by GPU count; the busiest trace VC
    goes to the largest cluster VC, and so on round-robin (so several small trace VCs share a
    cluster VC). VCs the cluster already has map to themselves. Returns {trace VC: cluster VC};
    empty when the cluster has no VCs (every node is shared then).
    """
    if not cluster.virtual_clusters:
        return {}
    demand: dict[str, float] = {}
    for vc, gpu_s in zip(jobs_vc.tolist(), gpu_seconds.tolist(), strict=True):
        if vc is not None:
            demand[vc] = demand.get(vc, 0.0) + gpu_s
    size = {
        vc: int(cluster.node_gpus[cluster.node_vc_code == i].sum())
        for i, vc in enumerate(cluster.virtual_clusters)
    }
    targets = sorted(size, key=lambda vc: (-size[vc], vc))
    mapping = {vc: vc for vc in demand if vc in size}
    foreign = sorted((vc for vc in demand if vc not in size), key=lambda vc: (-demand[vc], vc))
    for rank, vc in enumerate(foreign):
        mapping[vc] = targets[rank % len(targets)]
    return mapping


def resolve_cluster(
    name: str | None, trace_cluster: Cluster | None = None, default_name: str | None = None
) -> Cluster:
    """The cluster a command runs on: ``--cluster`` (a built-in name or a YAML file) when given,
    else the cluster the trace defines, else the built-in ``default_name``.

    Raises:
        HetschedError: When none of the three is available (the message says to pass --cluster).
    """
    if name is None:
        if trace_cluster is not None:
            return trace_cluster
        if default_name is None:
            raise HetschedError(
                f"the trace defines no cluster and its format has no default one; pass --cluster"
                f" (a YAML file or one of: {', '.join(CLUSTERS.names())})"
            )
        name = default_name
    if name.endswith((".yaml", ".yml")):
        return load_cluster(name)
    return CLUSTERS.create(name)
