"""Placement: which nodes a chosen job runs on (pack or spread), and candidate placements.

Every placer has one signature, ``place(request, state) -> Allocation | None`` (None = does not
fit now), so the simulator, EASY reservations and the MILP placer of the next layer can swap them.

Rules shared by all placers:
- only nodes allowed by the job's GPU-type constraint and virtual cluster are used;
- a job's CPUs and memory are split across its nodes in proportion to its GPUs there, and each
  node's free CPUs and memory must cover its share;
- a job spans nodes of one GPU type only (see :class:`~hetsched.jobs.cluster.Allocation`);
- a job needs the fewest nodes that can hold it (``min_nodes``); candidate placements may use one
  more node (RLTune's "way1 spreading vs way2 packing", Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from hetsched.jobs.cluster.model import Allocation, Cluster
from hetsched.jobs.cluster.state import ClusterState


@dataclass(frozen=True)
class JobRequest:
    """What a placer needs to know about one job.

    Attributes:
        num_gpus: Whole GPUs (0 = CPU-only job, placed on one node).
        cpus: CPU cores in total.
        memory_mib: Memory in total, MiB.
        eligible: Boolean mask over nodes allowed by GPU type and virtual cluster.
    """

    num_gpus: int
    cpus: float
    memory_mib: float
    eligible: np.ndarray


def capacity_per_node(request: JobRequest, state: ClusterState) -> np.ndarray:
    """How many of the job's GPUs each node can host now (0 for ineligible nodes).

    CPU and memory shares per GPU bound it too: a node with free GPUs but no free memory hosts 0.
    For a CPU-only job the result is 1 where the whole job fits, else 0.
    """
    gpus = request.num_gpus
    if gpus == 0:
        ok = (
            request.eligible
            & (state.free_cpus >= request.cpus - 1e-9)
            & (state.free_memory_mib >= request.memory_mib - 1e-9)
        )
        return ok.astype(np.int64)
    if request.cpus <= 0 and request.memory_mib <= 0:
        return np.where(request.eligible, state.free_gpus, 0)  # GPUs are the only bound
    cap = np.where(request.eligible, state.free_gpus, 0).astype(np.float64)
    # Bounds stay float until the end: a node without a CPU or memory limit has inf free, which
    # an early integer cast would turn into a huge negative capacity (the node would never fit).
    if request.cpus > 0:
        per_gpu = request.cpus / gpus
        cap = np.minimum(cap, np.floor(state.free_cpus / per_gpu + 1e-9))
    if request.memory_mib > 0:
        per_gpu = request.memory_mib / gpus
        cap = np.minimum(cap, np.floor(state.free_memory_mib / per_gpu + 1e-9))
    return np.maximum(cap, 0).astype(np.int64)


def _make_allocation(
    request: JobRequest, cluster: Cluster, nodes: np.ndarray, gpus: np.ndarray
) -> Allocation:
    total = max(request.num_gpus, 1)
    share = gpus / total if request.num_gpus else np.ones(len(nodes))
    return Allocation(
        node_indices=nodes.astype(np.int64),
        gpus=gpus.astype(np.int64),
        cpus=share * request.cpus,
        memory_mib=share * request.memory_mib,
        gpu_type=cluster.gpu_types[int(cluster.node_type_code[nodes[0]])],
    )


def _split(gpus: int, caps: np.ndarray, spread: bool) -> np.ndarray:
    """Distributes ``gpus`` over nodes with capacities ``caps`` (sorted descending), each >= 1.

    Pack fills the largest nodes first; spread water-fills evenly (every node gets the same share
    until some node's capacity caps it).
    """
    k = len(caps)
    out = np.ones(k, dtype=np.int64)
    left = gpus - k
    if spread:
        while left > 0:
            room = caps - out
            open_nodes = np.flatnonzero(room > 0)
            step = min(left, len(open_nodes))
            # Give one more GPU to the `step` open nodes with the most room (stable: lower index).
            chosen = open_nodes[np.argsort(-room[open_nodes], kind="stable")[:step]]
            out[chosen] += 1
            left -= step
        return out
    for i in range(k):
        extra = min(left, int(caps[i]) - 1)
        out[i] += extra
        left -= extra
    return out


def place_on_nodes(
    request: JobRequest, state: ClusterState, num_nodes: int | None, spread: bool
) -> Allocation | None:
    """Places the job on ``num_nodes`` nodes of one GPU type (None = the fewest possible).

    Single node: pack takes the eligible node with the fewest free GPUs that fits (best fit),
    spread the one with the most. Several nodes: the nodes with the most capacity of the chosen
    type, filled largest-first (pack) or evenly (spread). Among GPU types, the one needing the
    fewest nodes wins; ties go to the least free capacity for pack (keep big holes for big jobs)
    and the most for spread.
    """
    cluster = state.cluster
    cap = capacity_per_node(request, state)
    gpus = request.num_gpus
    fits = np.flatnonzero(cap >= max(gpus, 1))
    if gpus == 0 or num_nodes == 1 or (num_nodes is None and len(fits)):
        if len(fits) == 0:
            return None
        free = state.free_gpus[fits]
        pick = int(fits[np.argmax(free)] if spread else fits[np.argmin(free)])
        # One node holds all of it: the whole CPU and memory request goes there.
        return Allocation(
            node_indices=np.array([pick], dtype=np.int64),
            gpus=np.array([gpus], dtype=np.int64),
            cpus=np.array([request.cpus]),
            memory_mib=np.array([request.memory_mib]),
            gpu_type=cluster.gpu_types[int(cluster.node_type_code[pick])],
        )
    best: tuple[tuple[int, int], np.ndarray, np.ndarray] | None = None
    for code in range(len(cluster.gpu_types)):
        nodes = np.flatnonzero((cluster.node_type_code == code) & (cap > 0))
        if len(nodes) == 0:
            continue
        order = nodes[np.argsort(-cap[nodes], kind="stable")]
        caps = cap[order]
        cumulative = np.cumsum(caps)
        if cumulative[-1] < gpus:
            continue
        k_min = int(np.searchsorted(cumulative, gpus) + 1)
        k = k_min if num_nodes is None else num_nodes
        if k < k_min or k > min(len(order), gpus):
            continue
        total_free = int(caps.sum())
        rank = (k, total_free if not spread else -total_free)
        if best is None or rank < best[0]:
            best = (rank, order[:k], caps[:k])
    if best is None:
        return None
    _, chosen, caps = best
    return _make_allocation(request, cluster, chosen, _split(gpus, caps, spread))


def min_nodes(request: JobRequest, state: ClusterState) -> int | None:
    """The fewest nodes that can hold the job now (None if it does not fit)."""
    allocation = place_on_nodes(request, state, None, spread=False)
    return None if allocation is None else allocation.num_nodes


def candidate_placements(
    request: JobRequest, state: ClusterState, extra_nodes: int = 1
) -> list[Allocation]:
    """Distinct feasible placements: pack and spread on the fewest nodes and on up to
    ``extra_nodes`` more (the choice set of RLTune's Algorithm 1, way1 vs way2).

    Returns an empty list when the job does not fit now.
    """
    k_min = min_nodes(request, state)
    if k_min is None:
        return []
    seen: set[tuple] = set()
    out: list[Allocation] = []
    for k in range(k_min, k_min + extra_nodes + 1):
        for spread in (False, True):
            allocation = place_on_nodes(request, state, k, spread)
            if allocation is not None and allocation.key() not in seen:
                seen.add(allocation.key())
                out.append(allocation)
    return out


class Placer(Protocol):
    """Chooses nodes for one job; None when it does not fit now."""

    name: str

    def place(self, request: JobRequest, state: ClusterState) -> Allocation | None:
        """Returns an allocation that fits ``state`` or None."""
        ...


@runtime_checkable
class LookaheadPlacer(Protocol):
    """A placer that keeps room for the next jobs in priority order (the MILP placer): the
    simulator tells it those jobs through :meth:`set_lookahead` before each placement."""

    name: str
    lookahead_jobs: int

    def place(self, request: JobRequest, state: ClusterState) -> Allocation | None:
        """Returns an allocation that fits ``state`` or None."""
        ...

    def set_lookahead(self, upcoming: Sequence[JobRequest]) -> None:
        """The next jobs in priority order, for the next :meth:`place` call only."""
        ...


class PackPlacer:
    """Fewest nodes, best fit: keeps large free blocks for large jobs (consolidation)."""

    name = "pack"

    def place(self, request: JobRequest, state: ClusterState) -> Allocation | None:
        """Best-fit placement on the fewest nodes."""
        return place_on_nodes(request, state, None, spread=False)


class SpreadPlacer:
    """Most-free nodes: balances load and eases intra-node contention."""

    name = "spread"

    def place(self, request: JobRequest, state: ClusterState) -> Allocation | None:
        """Worst-fit placement on the fewest nodes, GPUs split evenly."""
        return place_on_nodes(request, state, None, spread=True)
