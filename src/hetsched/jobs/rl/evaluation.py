"""Evaluating trained prioritisers against base policies on held-out windows (section 5.2-5.3).

The paper's protocol: 10 random sequences of 1,024 jobs (seeded here), each replayed from an
empty cluster under a base policy and under the agent; means over the windows are compared
(Fig. 12, Tables 6 and 9), and an agent trained against one base policy is also compared with the
others (Table 7, transfer). The agent's schedule does not depend on the base policy, so each
checkpoint is simulated once per window and compared with every base.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.rl.policy import policy_from_checkpoint
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.sim.windows import window_starts
from hetsched.jobs.traces.job_table import JobTable

#: Summary keys shown in tables and box plots, in the paper's order (Table 9).
TABLE_METRICS: tuple[str, ...] = ("bsld", "wait_s", "jct_s", "utilisation_pct")
LOWER_IS_BETTER = {"bsld": True, "wait_s": True, "jct_s": True, "utilisation_pct": False}


@dataclass
class EvaluationReport:
    """Per-window summaries of every base policy and every agent.

    Attributes:
        starts: The windows' first job indices in the evaluated (held-out) table.
        window_size: Jobs per window.
        base: Base policy -> one summary dict per window.
        agents: Agent label -> one summary dict per window.
        trained_on: Agent label -> the base policy it was trained against.
    """

    starts: list[int]
    window_size: int
    base: dict[str, list[dict[str, float]]]
    agents: dict[str, list[dict[str, float]]]
    trained_on: dict[str, str]

    def mean(self, policy: str, metric: str) -> float:
        """Mean of ``metric`` over the windows for a base policy or an agent label."""
        runs = self.agents.get(policy) or self.base[policy]
        return float(np.mean([r[metric] for r in runs]))

    def improvement_pct(self, agent: str, base: str, metric: str) -> float:
        """How much better the agent's window mean is than the base's, in % of the base."""
        b, r = self.mean(base, metric), self.mean(agent, metric)
        gap = (b - r) if LOWER_IS_BETTER[metric] else (r - b)
        return 100.0 * gap / abs(b) if b else 0.0

    def agent_for(self, base: str) -> str:
        """The agent trained against ``base`` if there is one, else the first agent."""
        for label, trained in self.trained_on.items():
            if trained == base:
                return label
        return next(iter(self.agents))

    def comparison_rows(self) -> list[dict[str, object]]:
        """Table 9/6-style rows: each base policy, then its RL counterpart with improvements."""
        rows: list[dict[str, object]] = []
        for base in self.base:
            rows.append({"policy": base, **{m: self.mean(base, m) for m in TABLE_METRICS}})
            agent = self.agent_for(base)
            row: dict[str, object] = {"policy": f"{agent} vs {base}"}
            for m in TABLE_METRICS:
                row[m] = self.mean(agent, m)
                row[f"{m}_improvement_pct"] = self.improvement_pct(agent, base, m)
            rows.append(row)
        return rows

    def transfer_rows(self, metric: str) -> list[dict[str, object]]:
        """Table 7: one row per agent (trained on), one column per base (tested on), in %."""
        return [
            {
                "trained_on": self.trained_on[agent],
                "agent": agent,
                **{base: self.improvement_pct(agent, base, metric) for base in self.base},
            }
            for agent in self.agents
        ]

    def to_json(self) -> dict[str, object]:
        """Everything, for ``evaluation.json``."""
        return {
            "starts": self.starts,
            "window_size": self.window_size,
            "trained_on": self.trained_on,
            "base": self.base,
            "agents": self.agents,
            "comparison": self.comparison_rows(),
            "transfer": {m: self.transfer_rows(m) for m in TABLE_METRICS},
        }


def agent_label(name: str, path: Path, taken: Collection[str]) -> str:
    """A row label for the checkpoint at ``path`` whose policy is called ``name``, not in
    ``taken``: the name, else the name with the file's stem, else with its folder too (several
    seeds' ``agent.pt`` from ``hetsched jobs train``), else numbered."""
    candidates = (name, f"{name}({path.stem})", f"{name}({path.parent.name}/{path.stem})")
    free = [label for label in candidates if label not in taken]
    number = len(taken) + 1
    while not free:
        free = [f"{name}(#{number})"] if f"{name}(#{number})" not in taken else []
        number += 1
    return free[0]


def evaluate_agents(
    jobs: JobTable,
    cluster: Cluster,
    checkpoints: Sequence[Path],
    bases: Sequence[str] = ("fcfs", "sjf", "f1", "wfp3"),
    windows: int = 10,
    window_size: int = 1024,
    seed: int = 0,
    placer: str = "pack",
    on_run: Callable[[], None] | None = None,
) -> EvaluationReport:
    """Replays ``windows`` seeded windows of ``jobs`` under each base and each checkpoint."""
    agents: dict[str, PriorityPolicy] = {}
    trained_on = {}
    for path in checkpoints:
        loaded = policy_from_checkpoint(path)
        label = agent_label(loaded.policy.name, Path(path), agents.keys())
        if label != loaded.policy.name:
            loaded = policy_from_checkpoint(path, label)
        agents[label] = loaded.policy
        trained_on[label] = str(loaded.meta.get("base_policy", "unknown"))
    for base in bases:
        make_policy(base)  # unknown names fail before any simulation
    starts = window_starts(len(jobs), window_size, windows, seed).tolist()
    config = SimulationConfig(placer=placer, drop_unrunnable=True)
    base_runs: dict[str, list[dict[str, float]]] = {b: [] for b in bases}
    agent_runs: dict[str, list[dict[str, float]]] = {a: [] for a in agents}
    for start in starts:
        window = jobs.window(int(start), window_size)
        for base in bases:
            base_runs[base].append(
                Simulator(window, cluster, make_policy(base), config).run().summary()
            )
            if on_run is not None:
                on_run()
        for label, policy in agents.items():
            agent_runs[label].append(Simulator(window, cluster, policy, config).run().summary())
            if on_run is not None:
                on_run()
    return EvaluationReport(starts, window_size, base_runs, agent_runs, trained_on)


def write_report(report: EvaluationReport, out_dir: Path) -> list[str]:
    """``evaluation.json``, ``comparison.csv``, ``transfer_<metric>.csv``, ``windows.csv`` and
    box plots ``box_<metric>.png``; returns the file names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "evaluation.json").write_text(json.dumps(report.to_json(), indent=2))
    written = ["evaluation.json"]
    rows = report.comparison_rows()
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k != "policy", k))
    _write_csv(out_dir / "comparison.csv", fields, rows)
    written.append("comparison.csv")
    for metric in ("wait_s", "bsld"):
        transfer = report.transfer_rows(metric)
        _write_csv(out_dir / f"transfer_{metric}.csv", list(transfer[0]), transfer)
        written.append(f"transfer_{metric}.csv")
    window_rows = []
    for policy, runs in {**report.base, **report.agents}.items():
        for start, summary in zip(report.starts, runs, strict=True):
            window_rows.append({"policy": policy, "start": start, **summary})
    _write_csv(out_dir / "windows.csv", list(window_rows[0]), window_rows)
    written.append("windows.csv")
    for metric in ("wait_s", "bsld", "jct_s"):  # Figs. 12, 14, 15
        plot_box(report, metric, out_dir / f"box_{metric}.png")
        written.append(f"box_{metric}.png")
    return written


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def plot_box(report: EvaluationReport, metric: str, path: Path) -> None:
    """Distribution over windows of each policy's mean ``metric``, base and RL side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, data = [], []
    for base in report.base:
        agent = report.agent_for(base)
        labels += [base, f"{agent}\nvs {base}"]
        data += [[r[metric] for r in report.base[base]], [r[metric] for r in report.agents[agent]]]
    fig, ax = plt.subplots(figsize=(1.2 * len(labels) + 1, 3.4))
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_ylabel(f"mean {metric} per window")
    ax.set_title(
        f"{metric} over {len(report.starts)} windows of {report.window_size} jobs", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
