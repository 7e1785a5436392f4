"""`hetsched jobs trace-info`, `synth` and `simulate`: trace inspection, synthetic traces and
trace-driven simulation of the heuristic (or trained) policies."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hetsched.jobs.cli.option_groups import TRACE_HELP
from hetsched.jobs.rl.policy import policy_by_name
from hetsched.jobs.sim.comparison import (
    choose_queue_modes,
    compare_policies,
    simulation_workload,
    write_comparison,
)
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.traces.rltune_csv import write_rltune_csv
from hetsched.jobs.traces.source import load_jobs
from hetsched.jobs.traces.statistics import trace_statistics
from hetsched.jobs.traces.synthetic import PROFILES, generate

DEFAULT_POLICIES = "fcfs,sjf,wfp3,unicep,f1,slurm,qssf"


FIX_NEGATIVE_HELP = "SWF: keep a job with a negative run time at 10 s (RLScheduler's fix-up)."


def trace_info(
    trace: Path = typer.Argument(..., help=TRACE_HELP),
    format: str = typer.Option("auto", "--format", help="swf, rltune, helios, philly, ..."),
    skip_bad_rows: bool = typer.Option(False, help="Skip malformed rows and count them."),
    fix_negative_runtime: bool = typer.Option(False, help=FIX_NEGATIVE_HELP),
) -> None:
    """Loads a trace and prints its statistics (the columns of the paper's Table 2)."""
    loaded = load_jobs(
        trace, format, skip_bad_rows=skip_bad_rows, fix_negative_run_time=fix_negative_runtime
    )
    for note in loaded.notes:
        Console().print(note)
    table = Table(title=f"{loaded.name} ({loaded.format})")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in trace_statistics(loaded):
        table.add_row(key, value)
    Console().print(table)


def synth(
    profile: str = typer.Option("helios", help="philly, helios or alibaba (Tables 2 and 4)."),
    jobs: int = typer.Option(2048, help="Number of jobs."),
    seed: int = typer.Option(0, help="Random seed."),
    out: Path = typer.Option(Path("runs/jobs/synthetic.csv"), help="RLTune 19-column CSV."),
) -> None:
    """Writes a seeded synthetic trace in RLTune's CSV format."""
    table = generate(PROFILES.get(profile), jobs, seed=seed)
    write_rltune_csv(table, out)
    typer.echo(
        f"wrote {len(table)} {profile} jobs to {out} (mean run {table.run_time_s.mean():.0f} s,"
        f" {len(table) / max(table.submit_time_s[-1], 1):.4f} jobs/s)"
    )


def simulate(
    trace: Path | None = typer.Option(None, help=TRACE_HELP),
    format: str = typer.Option("auto", "--format", help="Trace format (auto = from the name)."),
    synthetic: str | None = typer.Option(None, help="Use a synthetic profile instead."),
    jobs: int = typer.Option(2048, help="Jobs of the synthetic trace."),
    cluster: str | None = typer.Option(None, help="Built-in cluster name or a YAML file."),
    policy: str = typer.Option(DEFAULT_POLICIES, help="Comma-separated policies."),
    backfill: bool = typer.Option(False, "--backfill", help="EASY backfilling."),
    backfill_rule: str | None = typer.Option(
        None,
        "--backfill-rule",
        help="Backfill with this rule: easy, or rlscheduler (RLScheduler's rule, committed head).",
    ),
    strict: bool = typer.Option(False, "--strict", help="Strict order: the head blocks."),
    compare_modes: bool = typer.Option(
        False, "--compare-modes", help="Run every queue mode (strict ... greedy) each."
    ),
    modes_option: str | None = typer.Option(
        None,
        "--modes",
        help="Comma-separated queue modes: greedy, strict, committed, easy, rlscheduler-backfill.",
    ),
    placement: str = typer.Option("pack", help="pack or spread."),
    estimate: str = typer.Option(
        "auto", help="Requested time: auto, trace, user-history, noisy or oracle."
    ),
    speed_factors: bool = typer.Option(False, help="Per-GPU-type speed factors on."),
    cluster_fraction: float = typer.Option(
        1.0, help="Keep this share of each node shape (the slice train/evaluate use)."
    ),
    time_scale: float = typer.Option(
        1.0,
        "--time-scale",
        "--arrival-compression",
        help="Divide submit times by this (2 = arrivals twice as dense).",
    ),
    window: int = typer.Option(0, help="Replay one fixed window of this many jobs (0 = off)."),
    start: int = typer.Option(0, help="First job (row) of the fixed --window."),
    recompute_interval_s: float | None = typer.Option(
        None, help="Recompute priorities only every this many seconds (Slurm-like)."
    ),
    windows: int = typer.Option(0, help="Random windows to average (0 = whole trace)."),
    window_size: int = typer.Option(1024, help="Jobs per window."),
    seed: int = typer.Option(0, help="Seed of windows, estimates and synthetic traces."),
    priority_file: Path | None = typer.Option(None, help="QSSF durations CSV job_id,duration_s."),
    drop_unrunnable: bool = typer.Option(False, help="Drop jobs that can never fit."),
    skip_bad_rows: bool = typer.Option(False, help="Skip malformed rows and count them."),
    fix_negative_runtime: bool = typer.Option(False, help=FIX_NEGATIVE_HELP),
    out: Path = typer.Option(Path("runs/jobs/simulate"), help="Output folder."),
) -> None:
    """Replays a trace under each policy; prints a Table 9-style table and saves JSON/CSV/plots."""
    modes = choose_queue_modes(
        backfill, strict, compare_modes, _split(modes_option or ""), backfill_rule
    )
    options = {"qssf": {"priority_file": str(priority_file)}} if priority_file else {}
    # Unknown names and unreadable checkpoints fail before the trace is loaded.
    policies = [policy_by_name(name, **options.get(name, {})) for name in _split(policy)]
    console = Console()
    loaded = load_jobs(trace, format, synthetic, jobs, seed, skip_bad_rows, fix_negative_runtime)
    for note in loaded.notes:
        console.print(note)
    workload = simulation_workload(
        loaded,
        cluster,
        cluster_fraction,
        speed_factors,
        time_scale,
        estimate,
        seed,
        window,
        start,
        windows,
    )
    the_cluster, vc_mapping = workload.cluster, workload.vc_mapping
    if any(k != v for k, v in vc_mapping.items()):
        console.print(f"mapped {len(vc_mapping)} trace VCs onto {the_cluster.virtual_clusters}")
    base = SimulationConfig(
        placer=placement, recompute_interval_s=recompute_interval_s, drop_unrunnable=drop_unrunnable
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=len(modes) * len(policies) * max(windows, 1))
        comparison = compare_policies(
            workload.jobs,
            the_cluster,
            policies,
            modes,
            base,
            windows,
            window_size,
            seed,
            on_run=lambda: progress.advance(task),
        )
    title = f"{loaded.name} on {the_cluster.name}"
    if time_scale != 1.0:
        title += f", arrivals x{time_scale:g}"
    if window:
        title += f" (window of {window} jobs from job {start})"
    if windows:
        title += f" ({windows} windows of {window_size} jobs, seed {seed}; mean ± 95 % CI)"
    view = Table(title=title)
    for column in ("policy", "mode", "BSLD", "wait (s)", "JCT (s)", "GPU util (%)", "makespan"):
        view.add_column(column, justify="left" if column in ("policy", "mode") else "right")
    for s in comparison.summaries:
        m, ci = s.means, s.ci95
        view.add_row(
            s.policy,
            s.queue_mode,
            *(
                _with_ci(m[key], ci[key], digits)
                for key, digits in (
                    ("bsld", 2),
                    ("wait_s", 1),
                    ("jct_s", 1),
                    ("utilisation_pct", 2),
                    ("makespan_s", 0),
                )
            ),
        )
    console.print(view)
    settings = {
        "trace": str(trace) if trace else None,
        "synthetic": synthetic,
        "load_report": loaded.report,
        "cluster": the_cluster.describe(),
        "estimate": estimate,
        "placement": placement,
        "virtual_cluster_mapping": vc_mapping,
        "cluster_fraction": cluster_fraction,
        "time_scale": time_scale,
        "fixed_window": {"start": start, "jobs": window} if window else None,
        "windows": windows,
        "window_size": window_size,
        "seed": seed,
    }
    written = write_comparison(comparison, out, settings)
    console.print(f"saved in {out}: {', '.join(written)}")


def _with_ci(mean: float, half_width: float, digits: int) -> str:
    """``mean ± half`` (just the mean when the half-width is NaN: a single run)."""
    if math.isnan(half_width):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half_width:.{digits}f}"


def _split(names: str) -> list[str]:
    """The non-empty items of a comma-separated option."""
    return [name.strip() for name in names.split(",") if name.strip()]
