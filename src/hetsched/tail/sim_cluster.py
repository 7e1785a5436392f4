"""The simulated Table I cluster of the paper's experiment (Sec. V) and its latency model.

Four workers (Table I: 4/8/12/16 cores at 2.3 GHz) and the two inference pods' requests. A pod
runs :data:`POD_THREADS` intra-op threads; what a scheduler observes of a node (eqs. 6-8) and the
latency its pods get both follow from the pods placed on it.

Node latency model, calibrated from measured rows (harness CSV):
    log p90 = k + log FLOPs − α · log(cores_share · FREQ_eff / FREQ)
where cores_share = min(threads, cores · (1 − b) / pods_on_node) and every query gets lognormal
noise with the residual spread of the fit. The P90 regressor the placement scorers use is trained
on monitoring rows of this same simulated cluster (random pod mixes, :func:`monitoring_rows`), as
the paper trains on its cluster's Prometheus data.

Background load b (optional, ``background=(lo, hi)``; default (0, 0), the idle cluster): the
paper's nodes carry live load that requests do not show — BestEffort pods and daemons outside
Kubernetes declare no requests. Each node of a seed gets b ~ U[lo, hi] of its cores, and it enters
all three views alike: what a scheduler observes (eqs. 6-8, busy = min(1, b + pods · threads /
cores)), the latency model (the pods split the cores the background leaves, cores · (1 − b)) and the
monitoring rows the regressor learns from (each row with its own b from the same range). Default
scoring sees requests only, so b never changes its choice. Treating b as cores the pods cannot
take back is the pessimistic end: it fits daemons outside the kubepods cgroup, while CFS would
weight true BestEffort pods (cpu.shares 2) down against pods with requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import DataError
from hetsched.tail.harness import p90
from hetsched.tail.node_features import NodeCapacity

POD_THREADS = 4

GIB = 2**30


@dataclass(frozen=True)
class SimNode:
    """A Table I worker: cores, clock and allocatable memory."""

    name: str
    cores: int
    freq_ghz: float
    memory_bytes: int


TABLE_I = (
    SimNode("node1", 4, 2.3, 6 * GIB),
    SimNode("node2", 8, 2.3, 8 * GIB),
    SimNode("node3", 12, 2.3, 16 * GIB),
    SimNode("node4", 16, 2.3, 12 * GIB),
)

# Pod requests (cpu cores, memory bytes) as an inference deployment would declare them.
POD_REQUESTS: dict[str, tuple[float, float]] = {
    "resnet50": (1.0, 1 * GIB),
    "retinanet": (2.0, 2 * GIB),
}

IDLE = (0.0,) * len(TABLE_I)  # background fraction of every node's cores on the idle cluster

# What a scheduler observes before each placement: every node's eqs. 6-8, given the pods placed so
# far as (model, node index) pairs. The simulation computes them; the live run measures them.
Observer = Callable[[list[tuple[str, int]]], list[NodeCapacity]]


@dataclass(frozen=True)
class LatencyModel:
    """log p90 = k + log flops − α log(effective cores); noise σ per query (log scale)."""

    k: float
    alpha: float
    sigma: float

    def median_latency_s(self, flops: float, eff_cores: float) -> float:
        return math.exp(self.k + math.log(flops) - self.alpha * math.log(max(eff_cores, 0.05)))


def calibrate(rows: list[dict]) -> LatencyModel:
    """Least-squares fit of the latency model to measured (flops, cpu share, p90) rows."""
    if len(rows) < 3:
        raise DataError(f"need at least 3 measured rows to calibrate, got {len(rows)}")
    eff = np.array([max(r["cores"] * (1 - r["u_freq"]), 0.05) for r in rows], dtype=float)
    y = np.log([r["p90_s"] for r in rows]) - np.log([r["flops"] for r in rows])
    a = np.column_stack([np.ones(len(rows)), -np.log(eff)])
    (k, alpha), *_ = np.linalg.lstsq(a, y, rcond=None)
    sigma = float(np.std(y - a @ np.array([k, alpha])))
    return LatencyModel(float(k), float(np.clip(alpha, 0.1, 1.0)), min(sigma, 0.5))


def check_background(lo: float, hi: float) -> tuple[float, float]:
    """A background range must be fractions of a node's cores, ``0 <= lo <= hi < 1``.

    b = 1 would leave the pods no CPU at all, and lo > hi is no range; NaN fails as well.
    """
    if not 0.0 <= lo <= hi < 1.0:
        raise DataError(f"--background must be 'lo,hi' with 0 <= lo <= hi < 1, got {lo},{hi}")
    return lo, hi


def parse_background(text: str) -> tuple[float, float]:
    """Reads ``--background lo,hi`` (two numbers) into a checked range."""
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise DataError(f"--background must be two numbers 'lo,hi', got {text!r}") from None
    return check_background(lo, hi)


def pod_eff_cores(node: SimNode, pods_on_node: int, background: float = 0.0) -> float:
    """Cores a pod effectively gets: its threads, or an even CFS share of the cores the background
    leaves, cores · (1 − b) / pods, when the node is oversubscribed."""
    return min(POD_THREADS, node.cores * (1.0 - background) / max(pods_on_node, 1))


def node_capacity(node: SimNode, pods_on_node: int, background: float = 0.0) -> NodeCapacity:
    """Eqs. 6-8 as a scheduler would observe them with ``pods_on_node`` pods running next to a
    best-effort ``background`` fraction of the cores; utilisation cannot exceed a full node, the run
    queue per core (threads wanting a core, per core) can."""
    demand = background + pods_on_node * POD_THREADS / node.cores
    busy = min(1.0, demand)
    return NodeCapacity(node.name, node.cores, node.freq_ghz, busy, busy, runq_per_core=demand)


def simulated_observer(background: tuple[float, ...] = IDLE) -> Observer:
    """Eqs. 6-8 of the :data:`TABLE_I` nodes as the simulation observes them: every pod placed so
    far busy with its threads, next to each node's ``background`` fraction of the cores."""

    def observe(placed: list[tuple[str, int]]) -> list[NodeCapacity]:
        counts = [0] * len(TABLE_I)
        for _, node_idx in placed:
            counts[node_idx] += 1
        return [node_capacity(n, counts[i], background[i]) for i, n in enumerate(TABLE_I)]

    return observe


def run_queries(
    pods,
    placement,
    features,
    latency: LatencyModel,
    queries: int,
    rng,
    background: tuple[float, ...] = IDLE,
) -> list[float]:
    """Single-stream P90 of each pod given its node's co-located pods and background load."""
    counts = np.bincount(placement, minlength=len(TABLE_I))
    out = []
    for model, node_idx in zip(pods, placement, strict=True):
        cores = pod_eff_cores(TABLE_I[node_idx], counts[node_idx], background[node_idx])
        med = latency.median_latency_s(features[model].flops, cores)
        out.append(p90(list(med * rng.lognormal(0.0, latency.sigma, queries))))
    return out


def monitoring_rows(
    features,
    latency: LatencyModel,
    rng,
    background_rng,
    background: tuple[float, float] = (0.0, 0.0),
    samples: int = 400,
) -> list[dict]:
    """Training data from the simulated cluster: random pod counts and background per node,
    observed P90.

    The background of each row is drawn from ``background_rng`` over the benchmark's range, so the
    regressor has seen the loads it will be asked about; ``rng`` draws everything else, exactly as
    on the idle cluster.
    """
    rows = []
    models = list(features)
    for t in range(samples):
        node = TABLE_I[rng.integers(len(TABLE_I))]
        others = int(rng.integers(0, 6))
        model = models[rng.integers(len(models))]
        b = float(background_rng.uniform(*background))
        cap = node_capacity(node, others, b)
        med = latency.median_latency_s(features[model].flops, pod_eff_cores(node, others + 1, b))
        rows.append(
            {
                "timestamp_s": float(t),
                "model": model,
                "node": node.name,
                "size_mb": features[model].size_mb,
                "flops": features[model].flops,
                "cpu_eff": cap.cpu_eff,
                "freq_eff_ghz": cap.freq_eff_ghz,
                "p90_s": p90(list(med * rng.lognormal(0.0, latency.sigma, 200))),
            }
        )
    return rows
