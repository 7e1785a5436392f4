"""The clusters a command can name: the paper's built-in clusters, a YAML file, or the cluster a
trace defines; and the optional per-GPU-type speed factors."""

from __future__ import annotations

from hetsched.core.errors import HetschedError
from hetsched.core.registry import Registry
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.cluster.specs import load_cluster

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
