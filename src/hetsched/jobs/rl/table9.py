"""RLTune's Table 9 on one trace: FIFO, SchedInspector, RLScheduler and RLTune's prioritiser, plus
the best classic heuristic, each over seeded replicates, beside the paper's numbers.

Protocol (section 5.5 and Table 9's caption): every policy schedules the same ``windows`` random
windows of ``window_size`` held-out jobs (10 batches of 256 in the paper), each from an empty
cluster; a row's BSLD, wait, JCT and GPU utilisation are means over the windows, and its Time is
the wall-clock seconds the simulator took to schedule all of them under that policy (the paper's
"scheduling overhead for 10 batches of 256 jobs"; ours includes the simulator's own work, as theirs
does). A replicate ``r`` draws its windows with seed ``seed + r`` and runs the ``r``-th checkpoint
of each agent (by training seed); a row reports the mean and the 95 % confidence half-width
(Student's t) over replicates.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.core.metrics import mean_and_ci95
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.rl.policy import LoadedPolicy, policy_from_checkpoint
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.sim.windows import window_starts
from hetsched.jobs.traces.job_table import JobTable

#: Table 9's columns: summary keys, then the scheduling time.
TABLE9_METRICS: tuple[str, ...] = ("bsld", "wait_s", "jct_s", "utilisation_pct", "time_s")
#: Agent kind -> Table 9's row name, in the paper's row order (FIFO first).
ROW_OF_KIND: dict[str, str] = {
    "schedinspector": "SchedInspector",
    "rlscheduler": "RLScheduler",
    "rltune": "RLTune",
}
FIFO_ROW, BEST_ROW = "FIFO", "best heuristic"
#: The heuristics the best-heuristic row is chosen from (lowest mean BSLD).
HEURISTICS: tuple[str, ...] = ("sjf", "f1", "wfp3", "qssf")
PAPER_TRACES: tuple[str, ...] = ("philly", "helios", "alibaba")
_PAPER_TIME_S = {"FIFO": 86.76, "SchedInspector": 96.13, "RLScheduler": 181.27, "RLTune": 102.38}
_PAPER_VALUES = {  # (BSLD, wait s, JCT s, GPU utilisation) per trace and row, as printed
    "philly": {
        "FIFO": (1298.06, 142391.50, 169650.84, 4.63),
        "SchedInspector": (1114.52, 120623.63, 150347.88, 4.85),
        "RLScheduler": (491.92, 86512.85, 112022.08, 4.64),
        "RLTune": (232.82, 34199.93, 85761.51, 4.85),
    },
    "helios": {
        "FIFO": (161.77, 7264.58, 10483.16, 4.03),
        "SchedInspector": (152.16, 7187.54, 10715.42, 4.00),
        "RLScheduler": (117.83, 6178.47, 9211.55, 4.01),
        "RLTune": (75.24, 4335.87, 7541.40, 4.09),
    },
    "alibaba": {
        "FIFO": (88.32, 14306.14, 19219.08, 0.08),
        "SchedInspector": (89.52, 14470.00, 19382.94, 0.09),
        "RLScheduler": (52.18, 9641.81, 14554.75, 0.06),
        "RLTune": (44.05, 8726.45, 13639.38, 0.09),
    },
}


def paper_value(trace: str, row: str, metric: str) -> float | None:
    """The paper's Table 9 entry, or None where it has none (the best-heuristic row, an unknown
    trace)."""
    values = _PAPER_VALUES.get(trace, {}).get(row)
    if values is None:
        return None
    if metric == "time_s":
        return _PAPER_TIME_S[row]
    return values[TABLE9_METRICS.index(metric)]


@dataclass
class Table9Row:
    """One policy's replicates.

    Attributes:
        row: Table 9's row name (``FIFO``, ``SchedInspector``, ``RLScheduler``, ``RLTune``, or a
            heuristic's name).
        policy: The label of what ran (``fcfs``, ``SchedInspector-fcfs``, ``RL-fcfs``, ...).
        replicates: Per replicate, each metric's mean over the windows and ``time_s``.
    """

    row: str
    policy: str
    replicates: list[dict[str, float]]

    def stat(self, metric: str) -> tuple[float, float]:
        """Mean and 95 % half-width of ``metric`` over replicates."""
        return mean_and_ci95([r[metric] for r in self.replicates])


@dataclass
class Table9:
    """Table 9 for one trace.

    Attributes:
        trace: The paper's trace the numbers are compared with (``philly``, ``helios``,
            ``alibaba``) or ``none``.
        seeds: The window seed of each replicate.
        windows: Windows per replicate.
        window_size: Jobs per window.
        rows: FIFO and the agents, in the paper's order.
        heuristics: Every heuristic the best row was chosen from.
    """

    trace: str
    seeds: list[int]
    windows: int
    window_size: int
    rows: list[Table9Row]
    heuristics: list[Table9Row]

    @property
    def best(self) -> Table9Row:
        """The heuristic with the lowest mean BSLD."""
        return min(self.heuristics, key=lambda row: row.stat("bsld")[0])

    def shown_rows(self) -> list[tuple[str, Table9Row]]:
        """The rows as printed, with their Table 9 names: FIFO, the agents, the best heuristic."""
        return [*((row.row, row) for row in self.rows), (BEST_ROW, self.best)]

    def records(self) -> list[dict[str, object]]:
        """One flat record per shown row: mean, half-width and the paper's value per metric."""
        records: list[dict[str, object]] = []
        for name, row in self.shown_rows():
            record: dict[str, object] = {"row": name, "policy": row.policy}
            for metric in TABLE9_METRICS:
                mean, half = row.stat(metric)
                record[metric] = mean
                record[f"{metric}_ci95"] = half
                record[f"{metric}_paper"] = paper_value(self.trace, name, metric)
            records.append(record)
        return records

    def to_json(self) -> dict[str, object]:
        """Everything, for ``table9.json``."""
        return {
            "trace": self.trace,
            "seeds": self.seeds,
            "windows": self.windows,
            "window_size": self.window_size,
            "table": self.records(),
            "replicates": {row.policy: row.replicates for row in [*self.rows, *self.heuristics]},
        }


def agents_by_kind(checkpoints: Sequence[Path], replicates: int) -> dict[str, list[LoadedPolicy]]:
    """Loads the checkpoints and groups them by agent kind, each group sorted by training seed.

    Raises:
        HetschedError: If a kind has neither one checkpoint nor one per replicate.
        DataError: For an unreadable checkpoint.
    """
    groups: dict[str, list[LoadedPolicy]] = {}
    for path in checkpoints:
        loaded = policy_from_checkpoint(path)
        groups.setdefault(loaded.kind, []).append(loaded)
    for kind, group in groups.items():
        if len(group) not in (1, replicates):
            raise HetschedError(
                f"{len(group)} {kind} checkpoints for {replicates} replicates; pass one, or one"
                " per replicate (their training seeds give the order)"
            )
        group.sort(key=lambda loaded: int(loaded.meta.get("seed", 0)))
    return groups


def _replicate(
    windows: list[JobTable],
    cluster: Cluster,
    policy: PriorityPolicy,
    config: SimulationConfig,
    on_run: Callable[[], None] | None,
) -> dict[str, float]:
    summaries, elapsed_s = [], 0.0
    for window in windows:
        started = time.perf_counter()
        result = Simulator(window, cluster, policy, config).run()
        elapsed_s += time.perf_counter() - started
        summaries.append(result.summary())
        if on_run is not None:
            on_run()
    means = {m: float(np.mean([s[m] for s in summaries])) for m in TABLE9_METRICS[:-1]}
    return {**means, "time_s": elapsed_s}


def run_table9(
    jobs: JobTable,
    cluster: Cluster,
    checkpoints: Sequence[Path],
    trace: str = "none",
    replicates: int = 3,
    seed: int = 0,
    windows: int = 10,
    window_size: int = 256,
    placer: str = "pack",
    heuristics: Sequence[str] = HEURISTICS,
    on_run: Callable[[], None] | None = None,
) -> Table9:
    """Schedules the seeded windows of ``jobs`` under FIFO, every heuristic and every agent.

    Raises:
        HetschedError: For an unknown trace, no replicate, or checkpoints that do not match the
            replicates.
    """
    if trace not in (*PAPER_TRACES, "none"):
        known = ", ".join((*PAPER_TRACES, "none"))
        raise HetschedError(f"unknown Table 9 trace {trace!r}; known: {known}")
    if replicates < 1:
        raise HetschedError(f"need at least one replicate, got {replicates}")
    groups = agents_by_kind(checkpoints, replicates)
    for name in heuristics:
        make_policy(name)  # unknown names fail before any simulation
    config = SimulationConfig(placer=placer, drop_unrunnable=True)
    seeds = [seed + r for r in range(replicates)]
    fifo = Table9Row(FIFO_ROW, "fcfs", [])
    agents = [
        (kind, Table9Row(row, groups[kind][0].policy.name, []))
        for kind, row in ROW_OF_KIND.items()
        if kind in groups
    ]
    others = [Table9Row(name, name, []) for name in heuristics]
    for r, window_seed in enumerate(seeds):
        starts = window_starts(len(jobs), window_size, windows, window_seed)
        batch = [jobs.window(int(start), window_size) for start in starts]
        for row in (fifo, *others):
            policy = make_policy(row.policy)
            row.replicates.append(_replicate(batch, cluster, policy, config, on_run))
        for kind, row in agents:
            group = groups[kind]
            policy = group[r if len(group) > 1 else 0].policy
            row.replicates.append(_replicate(batch, cluster, policy, config, on_run))
    return Table9(trace, seeds, windows, window_size, [fifo, *(row for _, row in agents)], others)


def write_table9(table: Table9, out_dir: Path) -> list[str]:
    """``table9.json`` (everything, per replicate) and ``table9.csv`` (the printed rows with
    half-widths and the paper's values); returns the file names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "table9.json").write_text(json.dumps(table.to_json(), indent=2))
    records = table.records()
    with (out_dir / "table9.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return ["table9.json", "table9.csv"]
