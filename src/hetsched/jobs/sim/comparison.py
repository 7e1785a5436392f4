"""Comparing priority policies on one trace and cluster: what ``hetsched jobs simulate`` runs.

Each policy is replayed under each queue mode, either on the whole trace (per-job results and a
utilisation timeline are kept) or on seeded random windows (:mod:`hetsched.jobs.windows`, the
paper's protocol). The outcome is one row of mean metrics per (policy, mode), written as
``results.json``/``results.csv`` with the wait-time CDF and, for whole-trace runs, per-job CSVs and
the utilisation plot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.cluster.virtual_clusters import map_virtual_clusters
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import BACKFILL_MODES, QUEUE_MODES, SimulationConfig
from hetsched.jobs.sim.plots import plot_utilisation, plot_wait_cdf
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.windows import METRICS, WindowSummary, evaluate_windows, run_policy
from hetsched.jobs.traces.job_table import JobTable

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
        """``policy``, ``queue_mode`` and the mean of every metric in ``METRICS``, per summary."""
        return [{"policy": s.policy, "queue_mode": s.queue_mode, **s.means} for s in self.summaries]


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
        config = SimulationConfig(
            queue_mode=mode,  # type: ignore[arg-type]  # checked by choose_queue_modes/Simulator
            placer=base_config.placer,
            recompute_interval_s=base_config.recompute_interval_s,
            drop_unrunnable=base_config.drop_unrunnable,
        )
        for policy in policies:
            result = run_policy(jobs, cluster, policy, config)
            summary = result.summary()
            comparison.results[f"{policy.name}/{mode}"] = result
            comparison.summaries.append(
                WindowSummary(
                    policy.name,
                    mode,
                    0,
                    {m: summary[m] for m in METRICS},
                    [summary["bsld"]],
                    result.wait_s[result.finished],
                )
            )
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
    with (out_dir / "results.csv").open("w") as handle:
        handle.write("policy,queue_mode," + ",".join(METRICS) + "\n")
        for row in rows:
            values = ",".join(f"{row[m]:.6g}" for m in METRICS)
            handle.write(f"{row['policy']},{row['queue_mode']},{values}\n")
    plot_wait_cdf(comparison.summaries, out_dir / "wait_cdf.png")
    written = ["results.json", "results.csv", "wait_cdf.png"]
    if comparison.results:
        for label, result in comparison.results.items():
            policy, mode = label.rsplit("/", 1)
            result.write_csv(out_dir / f"jobs_{policy}_{mode}.csv")
        plot_utilisation(comparison.results, out_dir / "utilisation.png")
        written += ["utilisation.png", "jobs_<policy>_<mode>.csv"]
    return written
