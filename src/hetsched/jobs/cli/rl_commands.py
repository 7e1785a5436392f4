"""`hetsched jobs train` and `hetsched jobs evaluate`: RLTune's RL prioritiser on a trace.

Both commands load the same scenario (trace or synthetic profile, cluster slice, arrival
compression, requested-time model, 90 %/10 % split by time), so a model trained by ``train`` is
evaluated by ``evaluate`` on the held-out 10 % of the same jobs when given the same data options.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hetsched.core.errors import HetschedError
from hetsched.jobs.cli.option_groups import TRACE_HELP, option_group
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.agent import load_checkpoint
from hetsched.jobs.rl.episodes import EpisodeOutcome, check_metric
from hetsched.jobs.rl.evaluation import evaluate_agents, write_report
from hetsched.jobs.rl.ray_rollouts import open_rollouts
from hetsched.jobs.rl.scenario import Scenario, load_scenario
from hetsched.jobs.rl.table9 import (
    BEST_ROW,
    PAPER_TRACES,
    TABLE9_METRICS,
    Table9,
    paper_value,
    run_table9,
    write_table9,
)
from hetsched.jobs.rl.train_config import TrainConfig, check_agent
from hetsched.jobs.rl.training import plot_training_curve, train_agent

DEFAULT_BASES = "fcfs,sjf,f1,wfp3"


def _single_threaded_torch() -> None:
    """Per-decision tensors are tiny (one queue); torch's intra-op thread pool only adds wake-up
    latency, which on a loaded machine made each forward pass ~5x slower."""
    import torch

    torch.set_num_threads(1)


@dataclass(frozen=True)
class ScenarioOptions:
    """The data flags of ``train`` and ``evaluate``, declared once so that both commands take
    the same flags and load the same scenario (and split) from them."""

    trace: Annotated[Path | None, typer.Option(help=TRACE_HELP)] = None
    trace_format: Annotated[
        str, typer.Option("--format", help="Trace format (auto = from the name).")
    ] = "auto"
    synthetic: Annotated[
        str | None, typer.Option(help="Synthetic profile: philly, helios, alibaba.")
    ] = None
    jobs: Annotated[int, typer.Option(help="Jobs of the synthetic trace.")] = 4096
    cluster: Annotated[str | None, typer.Option(help="Built-in cluster name or a YAML file.")] = (
        None
    )
    cluster_fraction: Annotated[float, typer.Option(help="Keep this share of each node shape.")] = (
        1.0
    )
    arrival_compression: Annotated[
        float, typer.Option(help="Divide submit times by this (load).")
    ] = 1.0
    estimate: Annotated[
        str, typer.Option(help="Requested time: auto, user-history, noisy, ...")
    ] = "auto"
    data_seed: Annotated[
        int, typer.Option(help="Seed of the synthetic trace and the estimates.")
    ] = 0

    def load(self) -> Scenario:
        """The scenario with the 90 %/10 % split by time, so that ``evaluate``'s held-out part
        is the jobs that ``train`` never saw."""
        return load_scenario(
            self.trace,
            trace_format=self.trace_format,
            synthetic=self.synthetic,
            synthetic_jobs=self.jobs,
            cluster=self.cluster,
            cluster_fraction=self.cluster_fraction,
            estimate=self.estimate,
            train_fraction=0.9,
            seed=self.data_seed,
            arrival_compression=self.arrival_compression,
        )


def _describe(console: Console, scenario: Scenario) -> dict[str, object]:
    info = {
        "trace": scenario.name,
        "cluster": scenario.cluster.describe(),
        "jobs": len(scenario.jobs),
        "train_jobs": len(scenario.train),
        "test_jobs": len(scenario.test),
    }
    console.print(
        f"{scenario.name}: {len(scenario.jobs)} jobs ({len(scenario.train)} train /"
        f" {len(scenario.test)} held out) on {scenario.cluster.name}"
        f" ({len(scenario.cluster.nodes)} nodes, {scenario.cluster.total_gpus} GPUs)"
    )
    return info


def _cell(mean: float, half: float) -> str:
    """``mean ± half`` with the precision the magnitude needs (no ± for one replicate)."""
    digits = 2 if abs(mean) < 100 else (1 if abs(mean) < 10_000 else 0)
    return f"{mean:,.{digits}f}" + ("" if half != half else f" ± {half:,.{digits}f}")


def _table9_view(table: Table9, where: str) -> Table:
    """Table 9 as printed: ours (mean ± 95 % CI over replicates) beside the paper's value."""
    title = (
        f"Table 9, {where}: {len(table.seeds)} replicates x {table.windows} batches of"
        f" {table.window_size} jobs (ours: mean ± 95 % CI; paper: {table.trace})"
    )
    view = Table(title=title)
    view.add_column("policy")
    headers = {"bsld": "BSLD", "wait_s": "WT (s)", "jct_s": "JCT (s)"}
    headers.update({"utilisation_pct": "Util (%)", "time_s": "Time (s)"})
    for metric in TABLE9_METRICS:
        view.add_column(headers[metric], justify="right")
        view.add_column("paper", justify="right", style="dim")
    for name, row in table.shown_rows():
        cells = [f"{BEST_ROW} ({row.policy})" if name == BEST_ROW else name]
        for metric in TABLE9_METRICS:
            cells.append(_cell(*row.stat(metric)))
            paper = paper_value(table.trace, name, metric)
            cells.append("" if paper is None else f"{paper:,.2f}")
        view.add_row(*cells)
    return view


@option_group("data")
def train(
    data: ScenarioOptions = ScenarioOptions(),
    agent: str = typer.Option(
        "rltune",
        help="rltune (RLTune's prioritiser), rlscheduler (RLScheduler's kernel) or"
        " schedinspector (SchedInspector over --base-policy).",
    ),
    base_policy: str = typer.Option(
        "fcfs", help="Base policy of the reward, and the one SchedInspector inspects (fcfs = FIFO)."
    ),
    metric: str = typer.Option("wait", help="Reward metric: wait, jct, bsld or util."),
    epochs: int = typer.Option(10, help="Training epochs."),
    trajectories_per_epoch: int = typer.Option(100, help="Episodes per epoch (paper: 100)."),
    trajectories_per_update: int = typer.Option(4, help="Episodes per PPO update."),
    episode_jobs: int = typer.Option(256, help="Jobs per episode (paper: 256)."),
    max_queue: int | None = typer.Option(
        None, help="Visible queue slots (default: the agent's paper's: RLTune 256, else 128)."
    ),
    placement: str = typer.Option("pack", help="Placer: pack, spread or milp."),
    learning_rate: float = typer.Option(1e-3, help="Adam learning rate."),
    gae_lambda: float = typer.Option(1.0, help="GAE lambda (1 = Monte Carlo returns)."),
    max_rejections: int = typer.Option(
        4, help="SchedInspector: consecutive rejections before the pick is accepted unasked."
    ),
    seed: int = typer.Option(0, help="Training seed (weights, sampling, episode starts)."),
    workers: int = typer.Option(
        0,
        help="Rollout workers as Ray actors, one CPU each (0 = play episodes in this process)."
        " The trained agent is the same for any number.",
    ),
    address: str | None = typer.Option(
        None,
        help="With --workers: the Ray cluster to join (auto, HOST:PORT or ray://HOST:PORT);"
        " default a local Ray session with --workers CPUs.",
    ),
    out: Path = typer.Option(Path("runs/jobs/train"), help="Output folder."),
) -> None:
    """Trains a learned scheduler with PPO (RLTune's prioritiser, or the learned baselines
    RLScheduler and SchedInspector); saves checkpoints and curves."""
    check_agent(agent)
    check_metric(metric)
    make_policy(base_policy)
    _single_threaded_torch()
    PLACERS.get(placement)
    try:
        config = TrainConfig(
            agent=agent,
            base_policy=base_policy,
            metric=metric,
            epochs=epochs,
            trajectories_per_epoch=trajectories_per_epoch,
            trajectories_per_update=trajectories_per_update,
            episode_jobs=episode_jobs,
            max_queue=max_queue,
            placer=placement,
            seed=seed,
            learning_rate=learning_rate,
            gae_lambda=gae_lambda,
            max_rejections=max_rejections,
        )
    except ValueError as error:
        raise HetschedError(f"bad training option: {error}") from None
    console = Console()
    if workers > trajectories_per_update:
        console.print(
            f"note: at most {trajectories_per_update} of the {workers} workers are busy at a time"
            " (the trajectories of one update; see --trajectories-per-update)"
        )
    scenario = data.load()
    info = _describe(console, scenario)
    total = epochs * trajectories_per_epoch
    started = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[last]}"))
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(f"training {agent} ({metric})", total=total, last="")

        def advance(index: int, outcome: EpisodeOutcome) -> None:
            progress.update(task, advance=1, last=f"last reward {outcome.reward:+.3f}")

        with open_rollouts(scenario.train, scenario.cluster, config, workers, address) as rollouts:
            run = train_agent(scenario.train, scenario.cluster, config, out, advance, rollouts)
    wall_s = time.perf_counter() - started
    title = f"training {agent}, metric {metric}; improvement = normalised gap to {base_policy}"
    table = Table(title=title)
    for column in ("epoch", "episodes", "improvement", "base", "RL", "decisions/episode"):
        table.add_column(column, justify="right")
    for h in run.history:
        table.add_row(
            f"{h['epoch']}",
            f"{h['trajectories']}",
            f"{100 * h['improvement']:+.2f} %",
            f"{h['base_metric']:.2f}",
            f"{h['rl_metric']:.2f}",
            f"{h['decisions_per_episode']:.0f}",
        )
    console.print(table)
    plot_training_curve(
        run.history,
        f"{scenario.name}: {agent} vs {base_policy} ({metric})",
        out / "training_curve.png",
    )
    summary = {
        "scenario": info,
        "wall_s": wall_s,
        "rollout_workers": workers,
        "ray_address": address,
        "checkpoint": str(run.checkpoint),
    }
    (out / "run.json").write_text(json.dumps(summary, indent=2, default=str))
    console.print(
        f"trained {total} episodes in {wall_s:.0f} s; saved in {out}: agent.pt, checkpoints/,"
        " training.json, training.csv, training_curve.png, run.json"
    )


@option_group("data")
def evaluate(
    checkpoint: list[Path] = typer.Option(..., help="Agent checkpoint(s); repeat for several."),
    data: ScenarioOptions = ScenarioOptions(),
    bases: str = typer.Option(DEFAULT_BASES, help="Comma-separated base policies."),
    split: str = typer.Option("test", help="test (held-out 10 %), train or all."),
    windows: int = typer.Option(10, help="Random windows."),
    window_size: int | None = typer.Option(
        None, help="Jobs per window (default 1024; 256 with --table9, the paper's batches)."
    ),
    placement: str = typer.Option("pack", help="Placer: pack, spread or milp."),
    seed: int = typer.Option(0, help="Seed of the window starts."),
    table9: str | None = typer.Option(
        None,
        help="Print RLTune's Table 9 (FIFO, SchedInspector, RLScheduler, RLTune, best of the"
        " other --bases) beside the paper's numbers for this trace: philly, helios, alibaba, or"
        " none (no paper column).",
    ),
    replicates: int = typer.Option(
        1,
        help="With --table9: replicates (window seeds seed, seed+1, ...), mean ± 95 % CI; give"
        " each agent one checkpoint per replicate (ordered by training seed) or one for all.",
    ),
    out: Path = typer.Option(Path("runs/jobs/evaluate"), help="Output folder."),
) -> None:
    """Compares base policies with learned agents on seeded windows (Tables 6/7/9, Figs. 12/14/15);
    with --table9, prints Table 9 with the scheduling time of each policy."""
    _single_threaded_torch()
    base_names = [b.strip() for b in bases.split(",") if b.strip()]
    for name in base_names:
        make_policy(name)
    PLACERS.get(placement)
    for path in checkpoint:
        load_checkpoint(path)  # a bad file fails before the trace is loaded
    if split not in ("test", "train", "all"):
        raise HetschedError(f"unknown split {split!r}; known: test, train, all")
    if table9 is not None and table9 not in (*PAPER_TRACES, "none"):
        known = ", ".join((*PAPER_TRACES, "none"))
        raise HetschedError(f"unknown Table 9 trace {table9!r}; known: {known}")
    window_size = window_size or (256 if table9 is not None else 1024)
    console = Console()
    scenario = data.load()
    info = _describe(console, scenario)
    table_jobs = {"test": scenario.test, "train": scenario.train, "all": scenario.jobs}[split]
    if window_size > len(table_jobs):
        raise HetschedError(
            f"windows of {window_size} jobs do not fit the {split} part ({len(table_jobs)} jobs);"
            " pass a smaller --window-size"
        )
    if table9 is not None:
        heuristics = [name for name in base_names if name != "fcfs"]
        runs = replicates * windows * (1 + len(heuristics) + len(checkpoint))
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("Table 9", total=runs)
            result = run_table9(
                table_jobs,
                scenario.cluster,
                checkpoint,
                table9,
                replicates,
                seed,
                windows,
                window_size,
                placement,
                heuristics,
                on_run=lambda: progress.advance(task),
            )
        console.print(_table9_view(result, f"{scenario.name}, {split} part"))
        written = write_table9(result, out)
        (out / "run.json").write_text(
            json.dumps({"scenario": info, "split": split, "placement": placement}, indent=2)
        )
        console.print(f"saved in {out}: {', '.join(written)}, run.json")
        return
    runs = windows * (len(base_names) + len(checkpoint))
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("evaluating", total=runs)
        report = evaluate_agents(
            table_jobs,
            scenario.cluster,
            checkpoint,
            base_names,
            windows,
            window_size,
            seed,
            placement,
            on_run=lambda: progress.advance(task),
        )
    title = f"{scenario.name}, {split} part: {windows} windows of {window_size} jobs (seed {seed})"
    view = Table(title=title)
    for column in ("policy", "BSLD", "wait (s)", "JCT (s)", "GPU util (%)", "Δ wait", "Δ BSLD"):
        view.add_column(column, justify="left" if column == "policy" else "right")
    for row in report.comparison_rows():
        delta = [
            f"{row[f'{m}_improvement_pct']:+.1f} %" if f"{m}_improvement_pct" in row else ""
            for m in ("wait_s", "bsld")
        ]
        view.add_row(
            str(row["policy"]),
            f"{row['bsld']:.2f}",
            f"{row['wait_s']:.1f}",
            f"{row['jct_s']:.1f}",
            f"{row['utilisation_pct']:.2f}",
            *delta,
        )
    console.print(view)
    transfer = Table(title="wait-time improvement (%): trained on (rows) x tested on (columns)")
    transfer.add_column("trained on")
    for base in base_names:
        transfer.add_column(base, justify="right")
    for row in report.transfer_rows("wait_s"):
        transfer.add_row(str(row["agent"]), *(f"{row[b]:+.2f}" for b in base_names))
    console.print(transfer)
    written = write_report(report, out)
    (out / "run.json").write_text(
        json.dumps({"scenario": info, "split": split, "placement": placement}, indent=2)
    )
    console.print(f"saved in {out}: {', '.join(written)}, run.json")
