"""Evaluation on random windows of a trace (RLScheduler's protocol, used by the paper).

Each iteration picks a random start (seeded), takes ``window_size`` consecutive jobs, rebases
them to t = 0 and replays them on an empty cluster. Every policy and queue mode sees the same
windows, so their averages are paired comparisons. Policies come in as objects (a heuristic from
the registry or an RL checkpoint's policy), so this module needs neither the registry nor torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

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
    """Mean of each metric over the windows for one (policy, queue mode)."""

    policy: str
    queue_mode: str
    windows: int
    means: dict[str, float]
    per_window_bsld: list[float]
    waits_s: np.ndarray


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
    """Mean metrics per (policy, mode) over ``count`` seeded windows of ``window_size`` jobs."""
    starts = window_starts(len(jobs), window_size, count, seed)
    windows = [jobs.window(int(s), window_size) for s in starts]
    base = base_config or SimulationConfig()
    out = []
    for mode in modes:
        config = SimulationConfig(
            queue_mode=mode,  # type: ignore[arg-type]
            placer=base.placer,
            recompute_interval_s=base.recompute_interval_s,
            drop_unrunnable=base.drop_unrunnable,
        )
        for policy in policies:
            summaries, waits = [], []
            for window in windows:
                result = run_policy(window, cluster, policy, config)
                summaries.append(result.summary())
                waits.append(result.wait_s[result.finished])
                if on_run is not None:
                    on_run()
            means = {m: float(np.mean([s[m] for s in summaries])) for m in METRICS}
            bslds = [s["bsld"] for s in summaries]
            waits_s = np.concatenate(waits)
            out.append(WindowSummary(policy.name, mode, count, means, bslds, waits_s))
    return out
