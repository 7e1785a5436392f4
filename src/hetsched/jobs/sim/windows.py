"""Evaluation on random windows of a trace (RLScheduler's protocol, used by the paper).

Each iteration picks a random start (seeded), takes ``window_size`` consecutive jobs, rebases
them to t = 0 and replays them on an empty cluster. Every policy and queue mode sees the same
windows, so their averages are paired comparisons. Policies come in as objects (a heuristic from
the registry or an RL checkpoint's policy), so this module needs neither the registry nor torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hetsched.core.metrics import mean_and_ci95
from hetsched.core.seeding import make_rng
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import JobTable

METRICS: tuple[str, ...] = ("bsld", "wait_s", "jct_s", "utilisation_pct", "makespan_s")


def window_starts(num_jobs: int, window_size: int, count: int, seed: int) -> np.ndarray:
    """``count`` seeded random window starts in [0, num_jobs - window_size]."""
    if window_size > num_jobs:
        raise ValueError(f"window of {window_size} jobs is longer than the trace ({num_jobs})")
    return make_rng(seed).integers(0, num_jobs - window_size + 1, size=count)


@dataclass
class WindowSummary:
    """Each metric over the windows (or the one whole-trace run) of one (policy, queue mode).

    Attributes:
        policy: The policy's name.
        queue_mode: The queue mode.
        windows: Windows averaged (0 for one whole-trace run).
        per_window: Metric -> its value in each window (one value for a whole-trace run).
        waits_s: Every finished job's wait over all windows (for the wait CDF).
    """

    policy: str
    queue_mode: str
    windows: int
    per_window: dict[str, list[float]]
    waits_s: np.ndarray

    @property
    def means(self) -> dict[str, float]:
        """Mean of each metric over the windows."""
        return {m: float(np.mean(v)) for m, v in self.per_window.items()}

    @property
    def ci95(self) -> dict[str, float]:
        """95 % confidence half-width of each metric's mean (NaN with fewer than 2 windows)."""
        return {m: mean_and_ci95(v)[1] for m, v in self.per_window.items()}


def summarise_runs(
    policy: str, queue_mode: str, windows: int, results: Sequence[SimulationResult]
) -> WindowSummary:
    """The summary of one (policy, mode) from its runs (one per window, or one whole trace)."""
    summaries = [r.summary() for r in results]
    per_window = {m: [float(s[m]) for s in summaries] for m in METRICS}
    waits_s = np.concatenate([r.wait_s[r.finished] for r in results])
    return WindowSummary(policy, queue_mode, windows, per_window, waits_s)


def run_policy(
    jobs: JobTable, cluster: Cluster, policy: PriorityPolicy, config: SimulationConfig
) -> SimulationResult:
    """One simulation of ``jobs`` under ``policy``."""
    return Simulator(jobs, cluster, policy, config).run()


def evaluate_windows(
    jobs: JobTable,
    cluster: Cluster,
    policies: Sequence[PriorityPolicy],
    modes: Sequence[str],
    window_size: int = 1024,
    count: int = 10,
    seed: int = 0,
    base_config: SimulationConfig | None = None,
    on_run: Callable[[], None] | None = None,
) -> list[WindowSummary]:
    """Each metric per (policy, mode) over ``count`` seeded windows of ``window_size`` jobs."""
    starts = window_starts(len(jobs), window_size, count, seed)
    windows = [jobs.window(int(s), window_size) for s in starts]
    base = base_config or SimulationConfig()
    out = []
    for mode in modes:
        config = replace(base, queue_mode=mode)  # type: ignore[arg-type]  # Simulator checks it
        for policy in policies:
            results = []
            for window in windows:
                results.append(run_policy(window, cluster, policy, config))
                if on_run is not None:
                    on_run()
            out.append(summarise_runs(policy.name, mode, count, results))
    return out
