"""Measurement harness: real models served single-stream by MLPerf LoadGen on emulated nodes.

An emulated node is a set of this machine's cores at a nominal clock. One long-lived worker
process (torch is imported once: a cold import takes ~10 s on this loaded VM) serves every point:
per point it pins itself (``sched_setaffinity``) to the node's cores, sets torch's intra-op
threads (the node's core count, or fewer: on a shared 2-core VM two threads stall whenever
outside load lands on one core), and runs a LoadGen SingleStream test. Background contention is
busy-loop processes pinned to the node's cores, each busy for ``duty`` of every 10 ms period.
P90 is the sorted latency at index int(0.9 n) (eq. 10, MLPerf's definition).

The node features (eqs. 6-8) are taken twice per point:

- at arrival: psutil over a short window with the contention running and the model not yet
  started, as a scheduler sees the node before placing the pod;
- during the run: CPU-time counters read by the worker right before and after the measured
  queries, minus the worker's own CPU time, i.e. the load of everything *else* on the node while
  the queries ran (what the paper's Prometheus samples see beside the pod). Counters, not a
  polling thread, so the sampler costs no CPU on the cores it measures.

The contention's achieved duty (its processes' CPU seconds per wall second), the pod's own CPU
share and the 1-minute load average are recorded too, so a point says how much outside load it
really had. On a saturated node (outside load + pod = every core busy) the during-run outside load
is 1 − the pod's share: the during-run features then carry the CPU the pod itself received, which
no scheduler can observe before placing it; the arrival features are free of that.
"""

from __future__ import annotations

import contextlib
import csv
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.progress import track

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.contention import Contention, achieved_duty
from hetsched.tail.latency_exporter import LatencyExporter
from hetsched.tail.measurement_worker import MeasurementWorker
from hetsched.tail.models import resolve_model_features
from hetsched.tail.node_features import NodeCapacity, local_capacity

# psutil sampling window for the node features at arrival (long enough to average out jitter).
FEATURE_WINDOW_S = 0.5


@dataclass(frozen=True)
class EmulatedNode:
    """A node emulated as a set of this machine's cores at a nominal clock."""

    name: str
    cores: tuple[int, ...]
    freq_ghz: float


def parse_node_specs(text: str, freq_ghz: float = 2.3) -> list[EmulatedNode]:
    """Emulated nodes from ``"0;0,1"``: core-id sets separated by ';' (a CLI's ``--nodes``)."""
    nodes = []
    for spec in text.split(";"):
        try:
            cores = tuple(int(c) for c in spec.split(","))
        except ValueError:
            raise HetschedError(f"bad node spec {spec!r}: use core ids like '0;0,1'") from None
        nodes.append(EmulatedNode("cores" + "-".join(map(str, cores)), cores, freq_ghz))
    return nodes


def p90(latencies_s: list[float]) -> float:
    """Eq. 10 as MLPerf computes it: the sorted latency at index int(0.9 n)."""
    ordered = sorted(latencies_s)
    return ordered[int(0.9 * len(ordered))]


def outside_utilisation(node_busy_s: float, own_cpu_s: float, cores: int, wall_s: float) -> float:
    """U of everything except the measured pod on a node during a run (input to eqs. 6-7).

    Args:
        node_busy_s: busy CPU seconds summed over the node's cores in the window.
        own_cpu_s: the pod's own CPU seconds in the window (it runs only on these cores).
        cores: the node's core count.
        wall_s: the window's length.
    """
    if cores < 1 or wall_s <= 0:
        raise DataError(f"need cores >= 1 and a positive window, got {cores} and {wall_s}")
    return min(max((node_busy_s - own_cpu_s) / (cores * wall_s), 0.0), 1.0)


def measure_one(
    worker: MeasurementWorker,
    model_name: str,
    node: EmulatedNode,
    duty: float,
    queries: int,
    torch_threads: int = 0,
) -> dict:
    """One (model, node, contention) point: features at arrival, LoadGen latencies and P90, and
    the outside load during the run. ``torch_threads`` 0 means one thread per node core."""
    threads = torch_threads or len(node.cores)
    if not 1 <= threads <= len(node.cores):
        raise HetschedError(f"torch threads must be 1..{len(node.cores)}, got {threads}")
    features = resolve_model_features(model_name)
    with Contention(node.cores, duty) as contention:
        time.sleep(0.2)
        arrival = local_capacity(
            node.name, list(node.cores), window_s=FEATURE_WINDOW_S, freq_ghz=node.freq_ghz
        )
        contention_cpu_s, start = contention.cpu_seconds(), time.perf_counter()
        run = worker.run(model_name, node.cores, threads, queries)
        contention_wall_s = time.perf_counter() - start
        achieved = (
            achieved_duty(
                contention.cpu_seconds() - contention_cpu_s,
                contention.processes,
                contention_wall_s,
            )
            if contention.processes
            else 0.0
        )
    cores = len(node.cores)
    u_run = outside_utilisation(run["node_busy_s"], run["own_cpu_s"], cores, run["wall_s"])
    during = NodeCapacity(node.name, len(node.cores), node.freq_ghz, u_run, u_run)
    latencies = run["latencies_s"]
    return {
        "timestamp_s": time.time(),
        "model": model_name,
        "size_mb": features.size_mb,
        "flops": features.flops,
        "node": node.name,
        "cores": during.cores,
        "freq_ghz": during.freq_ghz,
        "torch_threads": threads,
        "contention_duty": duty,
        "contention_achieved": achieved,
        "load1": os.getloadavg()[0],
        "u_arrival": arrival.u_cores,
        "cpu_eff_arrival": arrival.cpu_eff,
        "freq_eff_arrival_ghz": arrival.freq_eff_ghz,
        "pod_cpu_share": run["own_cpu_s"] / (cores * run["wall_s"]),
        "u_cores": during.u_cores,
        "u_freq": during.u_freq,
        "cpu_eff": during.cpu_eff,
        "freq_eff_ghz": during.freq_eff_ghz,
        "run_s": run["wall_s"],
        "queries": len(latencies),
        "mean_s": sum(latencies) / len(latencies),
        "p90_s": p90(latencies),
        "latencies_s": latencies,
    }


CSV_COLUMNS = (
    "timestamp_s",
    "model",
    "size_mb",
    "flops",
    "node",
    "cores",
    "freq_ghz",
    "torch_threads",
    "contention_duty",
    "contention_achieved",
    "load1",
    "u_arrival",
    "cpu_eff_arrival",
    "freq_eff_arrival_ghz",
    "pod_cpu_share",
    "u_cores",
    "u_freq",
    "cpu_eff",
    "freq_eff_ghz",
    "run_s",
    "queries",
    "mean_s",
    "p90_s",
)


def measure_grid(
    models: dict[str, int],
    nodes: list[EmulatedNode],
    duties: list[float],
    repeats: int = 1,
    exporter: LatencyExporter | None = None,
    torch_threads: int = 0,
    seed: int = 0,
    out_csv: Path | None = None,
) -> list[dict]:
    """Measures every (model, node, duty) ``repeats`` times; ``models`` maps name -> queries.

    Each repeat is one pass over the grid in a seeded random order, so a drift in the machine's
    outside load lands on all cells alike instead of on the last models or duties. With
    ``out_csv`` every row is appended (and flushed) as soon as it is measured: a long run that is
    interrupted keeps the points it already has.
    """
    rng = np.random.default_rng(seed)
    grid = [(m, n, d) for m in models for n in nodes for d in duties]
    points = [grid[i] for _ in range(repeats) for i in rng.permutation(len(grid))]
    rows = []
    with MeasurementWorker() as worker, _csv_sink(out_csv) as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS) if handle else None
        if writer:
            writer.writeheader()
        for model, node, duty in track(points, description="measuring"):
            row = measure_one(worker, model, node, duty, models[model], torch_threads)
            if exporter is not None:
                exporter.record(row)
            rows.append({k: row[k] for k in CSV_COLUMNS})
            if writer:
                writer.writerow(rows[-1])
                handle.flush()
    return rows


def _csv_sink(path: Path | None):
    """An open text file for ``path`` (its folder created), or a null context for None."""
    if path is None:
        return contextlib.nullcontext()
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", newline="")
