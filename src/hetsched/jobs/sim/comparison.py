"""Comparing priority policies on one trace and cluster: what ``hetsched jobs simulate`` runs.

The workload (:func:`simulation_workload`) is the trace on its cluster, optionally sliced,
with arrivals compressed and cut to one fixed window (the same transformations ``train`` and
``evaluate`` use). Each policy is replayed under each queue mode, either on that workload whole
(per-job results and a utilisation timeline are kept) or on seeded random windows
(:mod:`hetsched.jobs.sim.windows`, the paper's protocol). The outcome is one row per (policy,
mode) with each metric's mean and 95 % confidence half-width over the windows, written as
``results.json``/``results.csv`` with the wait-time CDF and, for whole runs, per-job CSVs and the
utilisation plot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.catalog import resolve_cluster, with_speed_factors
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.cluster.slicing import slice_cluster
from hetsched.jobs.cluster.virtual_clusters import map_virtual_clusters
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import BACKFILL_MODES, QUEUE_MODES, SimulationConfig
from hetsched.jobs.sim.plots import plot_utilisation, plot_wait_cdf
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.windows import (
    METRICS,
    WindowSummary,
    evaluate_windows,
    run_policy,
    summarise_runs,
)
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import JobTable
from hetsched.jobs.traces.source import LoadedJobs
from hetsched.jobs.traces.transforms import compress_arrivals, fixed_window

#: The modes ``--compare-modes`` runs, strictest first.
ALL_QUEUE_MODES: tuple[str, ...] = (
    "strict",
    "committed",
    "rlscheduler-backfill",
    "easy",
    "greedy",
)


def choose_queue_modes(
    backfill: bool,
    strict: bool,
    compare_modes: bool,
    modes: Sequence[str] = (),
    backfill_rule: str | None = None,
) -> list[str]:
    """The queue modes to run: ``modes`` when given, all of them for ``compare_modes``, else one
    mode from the ``--backfill`` / ``--backfill-rule`` / ``--strict`` flags: ``--backfill`` runs
    EASY, ``--backfill-rule NAME`` the named rule (``easy`` or ``rlscheduler``), neither greedy.

    Raises:
        HetschedError: For ``--strict`` with a backfill flag, or an unknown mode or rule name.
    """
    if backfill_rule is not None and backfill_rule not in BACKFILL_MODES:
        known = ", ".join(BACKFILL_MODES)
        raise HetschedError(f"unknown backfill rule {backfill_rule!r}; known: {known}")
    backfill = backfill or backfill_rule is not None
    if backfill and strict:
        raise HetschedError("--backfill and --strict exclude each other")
    unknown = [m for m in modes if m not in QUEUE_MODES]
    if unknown:
        raise HetschedError(f"unknown queue modes {unknown}; known: {', '.join(QUEUE_MODES)}")
    if modes:
        return list(modes)
    if compare_modes:
        return list(ALL_QUEUE_MODES)
    if backfill:
        return [BACKFILL_MODES[backfill_rule or "easy"]]
    return ["strict" if strict else "greedy"]


def remap_virtual_clusters(jobs: JobTable, cluster: Cluster) -> tuple[JobTable, dict[str, str]]:
    """``jobs`` with their virtual clusters mapped onto ``cluster``'s
    (:func:`~hetsched.jobs.cluster.map_virtual_clusters`, busiest first), and the mapping."""
    demand_gpu_s = jobs.run_time_s * np.maximum(jobs.num_gpus, 1)
    mapping = map_virtual_clusters(jobs.virtual_cluster, demand_gpu_s, cluster)
    if all(k == v for k, v in mapping.items()):
        return jobs, mapping
    vcs = np.array([mapping.get(vc, vc) for vc in jobs.virtual_cluster.tolist()], dtype=object)
    return jobs.with_columns(virtual_cluster=vcs), mapping


@dataclass(frozen=True)
class Workload:
    """What ``simulate`` replays: the jobs (requested times filled), the cluster, and how the
    trace's virtual clusters were mapped onto the cluster's."""

    jobs: JobTable
    cluster: Cluster
    vc_mapping: dict[str, str]


def simulation_workload(
    loaded: LoadedJobs,
    cluster: str | None = None,
    cluster_fraction: float = 1.0,
    speed_factors: bool = False,
    time_scale: float = 1.0,
    estimate: str = "auto",
    seed: int = 0,
    window: int = 0,
    start: int = 0,
    random_windows: int = 0,
) -> Workload:
    """The workload of a comparison: ``cluster`` (a name or YAML; else the trace's or the
    format's) cut to ``cluster_fraction`` of each node shape (the slice ``train`` uses), speed
    factors on or off, the trace's virtual clusters mapped onto it, arrivals compressed by
    ``time_scale``, requested times filled by the ``estimate`` model, and, when ``window`` > 0,
    the fixed window of ``window`` jobs from job ``start`` (rebased to t = 0).

    Raises:
        HetschedError: For a bad fraction, time scale or window, ``start`` without ``window``,
            or a fixed window together with ``random_windows``.
    """
    if start and not window:
        raise HetschedError("--start needs --window (the fixed window's size)")
    if window and random_windows:
        raise HetschedError(
            "--window (one fixed window) and --windows (random ones) exclude each other"
        )
    the_cluster = resolve_cluster(cluster, loaded.cluster, loaded.default_cluster)
    the_cluster = slice_cluster(the_cluster, cluster_fraction)
    if speed_factors:
        the_cluster = with_speed_factors(the_cluster)
    jobs, vc_mapping = remap_virtual_clusters(loaded.jobs, the_cluster)
    jobs = fill_requested_times(compress_arrivals(jobs, time_scale), estimate, seed)
    if window:
        jobs = fixed_window(jobs, start, window)
    return Workload(jobs, the_cluster, vc_mapping)


@dataclass
class PolicyComparison:
    """Mean metrics per (policy, queue mode) and, for whole-trace runs, each run's result.

    Attributes:
        summaries: One per (mode, policy), in run order.
        results: ``"<policy>/<mode>"`` -> the whole-trace run (empty for window runs).
    """

    summaries: list[WindowSummary]
    results: dict[str, SimulationResult] = field(default_factory=dict)

    def rows(self) -> list[dict[str, object]]:
        """Per summary: ``policy``, ``queue_mode``, ``windows``, the mean of every metric in
        ``METRICS`` and its 95 % confidence half-width ``<metric>_ci95`` (NaN for one run)."""
        return [
            {
                "policy": s.policy,
                "queue_mode": s.queue_mode,
                "windows": s.windows,
                **s.means,
                **{f"{m}_ci95": half for m, half in s.ci95.items()},
            }
            for s in self.summaries
        ]


def compare_policies(
    jobs: JobTable,
    cluster: Cluster,
    policies: Sequence[PriorityPolicy],
    modes: Sequence[str],
    base_config: SimulationConfig,
    windows: int = 0,
    window_size: int = 1024,
    seed: int = 0,
    on_run: Callable[[], None] | None = None,
) -> PolicyComparison:
    """Replays ``jobs`` under every policy and mode: on the whole trace when ``windows`` is 0,
    else on ``windows`` seeded windows of ``window_size`` jobs (the same windows for all).

    Raises:
        HetschedError: When two policies share a name (their rows and files would collide).
    """
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise HetschedError(f"two policies share a name in {names}; their results would collide")
    if windows > 0:
        summaries = evaluate_windows(
            jobs, cluster, policies, modes, window_size, windows, seed, base_config, on_run
        )
        return PolicyComparison(summaries)
    comparison = PolicyComparison([])
    for mode in modes:
        config = replace(base_config, queue_mode=mode)  # type: ignore[arg-type]  # Simulator checks
        for policy in policies:
            result = run_policy(jobs, cluster, policy, config)
            comparison.results[f"{policy.name}/{mode}"] = result
            comparison.summaries.append(summarise_runs(policy.name, mode, 0, [result]))
            if on_run is not None:
                on_run()
    return comparison


def write_comparison(
    comparison: PolicyComparison, out_dir: Path, settings: Mapping[str, object]
) -> list[str]:
    """Writes ``results.json`` (``settings`` plus the rows), ``results.csv``, ``wait_cdf.png``
    and, for whole-trace runs, ``jobs_<policy>_<mode>.csv`` and ``utilisation.png``; returns the
    names written (the per-job CSVs as one pattern)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = comparison.rows()
    payload = {**settings, "results": rows}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    columns = [*METRICS, *(f"{m}_ci95" for m in METRICS)]
    with (out_dir / "results.csv").open("w") as handle:
        handle.write("policy,queue_mode,windows," + ",".join(columns) + "\n")
        for row in rows:
            values = ",".join(f"{row[m]:.6g}" for m in columns)
            handle.write(f"{row['policy']},{row['queue_mode']},{row['windows']},{values}\n")
    plot_wait_cdf(comparison.summaries, out_dir / "wait_cdf.png")
    written = ["results.json", "results.csv", "wait_cdf.png"]
    if comparison.results:
        for label, result in comparison.results.items():
            policy, mode = label.rsplit("/", 1)
            result.write_csv(out_dir / f"jobs_{policy}_{mode}.csv")
        plot_utilisation(comparison.results, out_dir / "utilisation.png")
        written += ["utilisation.png", "jobs_<policy>_<mode>.csv"]
    return written
