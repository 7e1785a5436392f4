"""The live benchmark's nodes: sets of this machine's cores standing for Table I's workers.

By default the nodes are Table I divided by :data:`LIVE_SCALE`: 4/8/12/16 cores become 1/2/3/4
cores (ids 0-9), memory and pod requests shrink by the same factor, and a pod gets Table I's 4
intra-op threads / 4 = 1. Nodes can also be given as core sets (``--live-nodes``); the checks here
refuse, before any pod starts, core sets that overlap or do not exist and pod mixes the nodes
cannot hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hetsched.core.errors import DataError
from hetsched.tail.harness import EmulatedNode
from hetsched.tail.sim_cluster import POD_REQUESTS, POD_THREADS, TABLE_I, SimNode
from hetsched.tail.zoo import MODELS

# One core of this machine stands for this many Table I cores (16 Table I cores -> 4 here).
LIVE_SCALE = 4


LIVE_POD_THREADS = POD_THREADS // LIVE_SCALE


# Allocatable memory per core of nodes given as core sets: Table I's cluster-wide ratio.
MEMORY_PER_CORE = sum(n.memory_bytes for n in TABLE_I) / sum(n.cores for n in TABLE_I)


@dataclass(frozen=True)
class LiveNode:
    """An emulated node: the cores its pods are pinned to, and its allocatable memory."""

    node: EmulatedNode
    memory_bytes: int

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def allocatable(self) -> SimNode:
        """What the scheduler filters and scores on: one allocatable cpu per core, and memory."""
        return SimNode(self.name, len(self.node.cores), self.node.freq_ghz, self.memory_bytes)


def table_i_nodes() -> list[LiveNode]:
    """Table I divided by :data:`LIVE_SCALE` on consecutive cores from 0 (1/2/3/4 cores)."""
    nodes, first = [], 0
    for sim in TABLE_I:
        cores = tuple(range(first, first + sim.cores // LIVE_SCALE))
        first += len(cores)
        emulated = EmulatedNode(sim.name, cores, sim.freq_ghz)
        nodes.append(LiveNode(emulated, sim.memory_bytes // LIVE_SCALE))
    return nodes


def resolve_nodes(given: list[EmulatedNode] | None, available: set[int]) -> list[LiveNode]:
    """The live nodes: ``given`` core sets (memory at :data:`MEMORY_PER_CORE`), or Table I / 4.

    Core ids must exist here and belong to one node only, or two nodes would share CPU that the
    scheduler counts twice.
    """
    if given is None:
        nodes = table_i_nodes()
        needed = sum(len(n.node.cores) for n in nodes)
        if needed > len(available):
            spec = ";".join(",".join(map(str, n.node.cores)) for n in nodes)
            raise DataError(
                f"the default --live-nodes (Table I / {LIVE_SCALE}: {spec!r}) needs {needed} "
                f"cores, this machine has {len(available)}; give --live-nodes, e.g. '0;1'"
            )
    else:
        nodes = [LiveNode(e, round(len(e.cores) * MEMORY_PER_CORE)) for e in given]
    counts = Counter(c for n in nodes for c in n.node.cores)
    if shared := sorted(c for c, k in counts.items() if k > 1):
        raise DataError(f"--live-nodes: cores {shared} are in more than one node (or twice in one)")
    if missing := sorted(set(counts) - available):
        raise DataError(
            f"--live-nodes: cores {missing} do not exist here (available: {sorted(available)})"
        )
    return nodes


def live_requests(models: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Pod (cpu, memory) requests scaled like the nodes; models outside the paper's two request
    what ResNet-50 does."""
    requests = {}
    for model in models:
        cpu, memory = POD_REQUESTS.get(model, POD_REQUESTS["resnet50"])
        requests[model] = (cpu / LIVE_SCALE, memory / LIVE_SCALE)
    return requests


def check_models(models: Sequence[str]) -> None:
    """Live pods build zoo models, so every name must be one (files and URLs are not served)."""
    if not models:
        raise DataError("--live-models: give at least one zoo model")
    if unknown := [m for m in models if m not in MODELS]:
        raise DataError(f"--live-models: unknown models {unknown}; the zoo has {MODELS.names()}")


def check_room(nodes: Sequence[LiveNode], requests: dict, pods: list[str], seed: int) -> None:
    """Fails before any pod starts if a seed's pods request more cpu or memory than the nodes have
    allocatable in total (NodeResourcesFit would leave a pod pending)."""
    totals = (
        ("cpu", sum(requests[m][0] for m in pods), sum(len(n.node.cores) for n in nodes)),
        ("memory bytes", sum(requests[m][1] for m in pods), sum(n.memory_bytes for n in nodes)),
    )
    for what, want, have in totals:
        if want > have:
            raise DataError(
                f"--live-nodes cannot hold the {len(pods)} pods of seed {seed}: they request "
                f"{want:g} {what}, the nodes have {have:g}; give more or larger --live-nodes, or "
                "lower --pods"
            )
