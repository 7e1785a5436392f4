"""What one simulation produced: per-job start and end, and the cluster's busy GPUs over time,
with the paper's metrics (wait, JCT, bounded slowdown, GPU utilisation, makespan) derived from
them."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetsched.core.metrics import summarize
from hetsched.jobs.cluster.model import Allocation, Cluster
from hetsched.jobs.traces.job_table import JobTable

#: Bounded slowdown's threshold (Feitelson): run times under 10 s count as 10 s.
BSLD_THRESHOLD_S = 10.0


@dataclass
class SimulationResult:
    """Per-job outcome and cluster-level metrics of one run.

    Per-job arrays follow the simulated table's rows; ``start_s``/``end_s`` are NaN for jobs
    dropped as unrunnable.
    """

    jobs: JobTable
    cluster: Cluster
    policy: str
    queue_mode: str
    start_s: np.ndarray
    end_s: np.ndarray
    gpu_type: np.ndarray
    nodes: np.ndarray
    utilisation_time_s: np.ndarray
    utilisation_busy_gpus: np.ndarray
    reservations: list[tuple[int, float, float]] = field(default_factory=list)
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    passes: int = 0

    @property
    def finished(self) -> np.ndarray:
        """Mask of jobs that ran."""
        return ~np.isnan(self.end_s)

    @property
    def wait_s(self) -> np.ndarray:
        """Start minus submit."""
        return self.start_s - self.jobs.submit_time_s

    @property
    def run_s(self) -> np.ndarray:
        """Actual run time (after the GPU type's speed factor)."""
        return self.end_s - self.start_s

    @property
    def jct_s(self) -> np.ndarray:
        """Job completion time: end minus submit."""
        return self.end_s - self.jobs.submit_time_s

    @property
    def bounded_slowdown(self) -> np.ndarray:
        """max(1, (wait + run) / max(run, 10 s)) per job."""
        run = self.run_s
        return np.maximum(1.0, (self.wait_s + run) / np.maximum(run, BSLD_THRESHOLD_S))

    @property
    def makespan_s(self) -> float:
        """Last completion minus first submission."""
        done = self.finished
        if not done.any():
            return 0.0
        return float(np.nanmax(self.end_s) - self.jobs.submit_time_s[done].min())

    def gpu_utilisation(self) -> float:
        """Busy GPU-seconds / (cluster GPUs x makespan), in [0, 1]."""
        t, busy = self.utilisation_time_s, self.utilisation_busy_gpus
        span = self.makespan_s
        if len(t) < 2 or span <= 0:
            return 0.0
        area = float(np.sum(busy[:-1] * np.diff(t)))
        return area / (self.cluster.total_gpus * span)

    def summary(self) -> dict[str, float]:
        """Mean wait, JCT, bounded slowdown, utilisation (%) and makespan, plus tails."""
        done = self.finished
        wait, jct = summarize(self.wait_s[done]), summarize(self.jct_s[done])
        bsld = summarize(self.bounded_slowdown[done])
        return {
            "jobs": int(done.sum()),
            "dropped": len(self.dropped),
            "bsld": bsld.mean,
            "bsld_p90": bsld.p90,
            "wait_s": wait.mean,
            "wait_p90_s": wait.p90,
            "jct_s": jct.mean,
            "utilisation_pct": 100.0 * self.gpu_utilisation(),
            "makespan_s": self.makespan_s,
        }

    def write_csv(self, path: str | Path) -> None:
        """Per-job rows: id, user, submit, start, end, wait, JCT, bsld, GPUs, type, nodes."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cols = ["job_id", "user", "submit_s", "start_s", "end_s", "wait_s", "jct_s", "bsld"]
        cols += ["num_gpus", "gpu_type", "nodes"]
        wait, jct, bsld = self.wait_s, self.jct_s, self.bounded_slowdown
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(cols)
            for i in range(len(self.jobs)):
                writer.writerow(
                    [
                        self.jobs.id[i],
                        self.jobs.user[i],
                        self.jobs.submit_time_s[i],
                        self.start_s[i],
                        self.end_s[i],
                        wait[i],
                        jct[i],
                        bsld[i],
                        self.jobs.num_gpus[i],
                        self.gpu_type[i],
                        self.nodes[i],
                    ]
                )

    def write_json(self, path: str | Path) -> None:
        """The summary plus the run's settings as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "policy": self.policy,
            "queue_mode": self.queue_mode,
            "cluster": self.cluster.describe(),
            "summary": self.summary(),
            "dropped_job_ids": [str(self.jobs.id[i]) for i in self.dropped],
        }
        path.write_text(json.dumps(payload, indent=2))


def placement_columns(
    allocations: Sequence[Allocation | None], cluster: Cluster
) -> tuple[np.ndarray, np.ndarray]:
    """The ``gpu_type`` and ``nodes`` columns of a result from each job's allocation (None for
    a job that never ran): the GPU type, and ``node:gpus`` pairs joined by ``;``."""
    names = [node.name for node in cluster.nodes]
    gpu_type = np.full(len(allocations), "", dtype=object)
    nodes = np.full(len(allocations), "", dtype=object)
    for i, alloc in enumerate(allocations):
        if alloc is not None:
            gpu_type[i] = alloc.gpu_type
            nodes[i] = ";".join(
                f"{names[k]}:{g}"
                for k, g in zip(alloc.node_indices.tolist(), alloc.gpus.tolist(), strict=True)
            )
    return gpu_type, nodes
