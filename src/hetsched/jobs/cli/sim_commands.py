"""`hetsched jobs trace-info`, `synth` and `simulate`: trace inspection, synthetic traces and
trace-driven simulation of the heuristic (or trained) policies."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hetsched.jobs.cli.option_groups import TRACE_HELP
from hetsched.jobs.cluster.catalog import resolve_cluster, with_speed_factors
from hetsched.jobs.rl.policy import policy_by_name
from hetsched.jobs.sim.comparison import (
    choose_queue_modes,
    compare_policies,
    remap_virtual_clusters,
    write_comparison,
)
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.rltune_csv import write_rltune_csv
from hetsched.jobs.traces.source import load_jobs
from hetsched.jobs.traces.statistics import trace_statistics
from hetsched.jobs.traces.synthetic import PROFILES, generate

DEFAULT_POLICIES = "fcfs,sjf,wfp3,unicep,f1,slurm,qssf"


def trace_info(
    trace: Path = typer.Argument(..., help=TRACE_HELP),
    format: str = typer.Option("auto", "--format", help="swf, rltune, helios, philly, ..."),
    skip_bad_rows: bool = typer.Option(False, help="Skip malformed rows and count them."),
) -> None:
    """Loads a trace and prints its statistics (the columns of the paper's Table 2)."""
    loaded = load_jobs(trace, format, skip_bad_rows=skip_bad_rows)
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
    recompute_interval_s: float | None = typer.Option(
        None, help="Recompute priorities only every this many seconds (Slurm-like)."
    ),
    windows: int = typer.Option(0, help="Random windows to average (0 = whole trace)."),
    window_size: int = typer.Option(1024, help="Jobs per window."),
    seed: int = typer.Option(0, help="Seed of windows, estimates and synthetic traces."),
    priority_file: Path | None = typer.Option(None, help="QSSF durations CSV job_id,duration_s."),
    drop_unrunnable: bool = typer.Option(False, help="Drop jobs that can never fit."),
    skip_bad_rows: bool = typer.Option(False, help="Skip malformed rows and count them."),
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
    loaded = load_jobs(trace, format, synthetic, jobs, seed, skip_bad_rows)
    the_cluster = resolve_cluster(cluster, loaded.cluster, loaded.default_cluster)
    if speed_factors:
        the_cluster = with_speed_factors(the_cluster)
    table, vc_mapping = remap_virtual_clusters(loaded.jobs, the_cluster)
    if any(k != v for k, v in vc_mapping.items()):
        console.print(f"mapped {len(vc_mapping)} trace VCs onto {the_cluster.virtual_clusters}")
    table = fill_requested_times(table, estimate, seed)
    base = SimulationConfig(
        placer=placement, recompute_interval_s=recompute_interval_s, drop_unrunnable=drop_unrunnable
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=len(modes) * len(policies) * max(windows, 1))
        comparison = compare_policies(
            table,
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
    if windows:
        title += f" ({windows} windows of {window_size} jobs, seed {seed})"
    view = Table(title=title)
    for column in ("policy", "mode", "BSLD", "wait (s)", "JCT (s)", "GPU util (%)", "makespan"):
        view.add_column(column, justify="left" if column in ("policy", "mode") else "right")
    for s in comparison.summaries:
        m = s.means
        view.add_row(
            s.policy,
            s.queue_mode,
            f"{m['bsld']:.2f}",
            f"{m['wait_s']:.1f}",
            f"{m['jct_s']:.1f}",
            f"{m['utilisation_pct']:.2f}",
            f"{m['makespan_s']:.0f}",
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
        "windows": windows,
        "window_size": window_size,
        "seed": seed,
    }
    written = write_comparison(comparison, out, settings)
    console.print(f"saved in {out}: {', '.join(written)}")


def _split(names: str) -> list[str]:
    """The non-empty items of a comma-separated option."""
    return [name.strip() for name in names.split(",") if name.strip()]
