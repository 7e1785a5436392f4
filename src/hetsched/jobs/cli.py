"""`hetsched jobs` sub-commands: trace inspection, synthetic traces and trace-driven simulation."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from hetsched.core.errors import HetschedError

app = typer.Typer(no_args_is_help=True)

#: The cluster a trace format runs on when ``--cluster`` is not given and the trace has none.
DEFAULT_CLUSTER_BY_FORMAT = {
    "rltune": "rltune-synthetic",
    "helios": "helios",
    "philly": "philly",
    "alibaba2020": "alibaba",
}
DEFAULT_POLICIES = "fcfs,sjf,wfp3,unicep,f1,slurm,qssf"


def _resolve_cluster(name: str | None, trace_cluster, trace_format: str):
    from hetsched.jobs.cluster import CLUSTERS, load_cluster

    if name is None:
        if trace_cluster is not None:
            return trace_cluster
        if trace_format not in DEFAULT_CLUSTER_BY_FORMAT:
            raise HetschedError(f"format {trace_format!r} defines no cluster; pass --cluster")
        name = DEFAULT_CLUSTER_BY_FORMAT[trace_format]
    if name.endswith((".yaml", ".yml")):
        return load_cluster(name)
    return CLUSTERS.create(name)


def _load_jobs(trace: Path | None, fmt: str, synthetic: str | None, jobs: int, seed: int, skip):
    """(job table, trace cluster or None, format name, load report dict)."""
    if (trace is None) == (synthetic is None):
        raise HetschedError("give exactly one of --trace or --synthetic")
    if synthetic is not None:
        from hetsched.jobs.synthetic import PROFILES, generate

        profile = PROFILES.get(synthetic)
        table = generate(profile, jobs, seed=seed)
        return table, None, profile.cluster, {"synthetic": synthetic, "jobs": jobs, "seed": seed}
    from hetsched.jobs.traces import detect_format, load_trace

    name = detect_format(trace) if fmt == "auto" else fmt
    loaded = load_trace(trace, name, skip_bad_rows=skip)
    return loaded.jobs, loaded.cluster, name, loaded.report.as_dict()


@app.command("trace-info")
def trace_info(
    trace: Path = typer.Argument(..., help="Trace file (or PAI 2020 folder)."),
    format: str = typer.Option("auto", "--format", help="swf, rltune, helios, philly, ..."),
    skip_bad_rows: bool = typer.Option(False, help="Skip malformed rows and count them."),
) -> None:
    """Loads a trace and prints its statistics (the columns of the paper's Table 2)."""
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    jobs, cluster, name, report = _load_jobs(trace, format, None, 0, 0, skip_bad_rows)
    span = float(jobs.submit_time_s[-1] - jobs.submit_time_s[0])
    sizes, counts = np.unique(jobs.num_gpus, return_counts=True)
    typed = sum(1 for t in jobs.gpu_types if t)
    table = Table(title=f"{trace.name} ({name})")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    rows = [
        ("jobs", f"{len(jobs)}"),
        ("users", f"{len(set(jobs.user.tolist()))}"),
        ("span (days)", f"{span / 86400:.2f}"),
        ("arrival rate (jobs/s)", f"{(len(jobs) - 1) / span:.6f}" if span > 0 else "-"),
        ("mean run time (s)", f"{jobs.run_time_s.mean():.1f}"),
        ("max run time (s)", f"{jobs.run_time_s.max():.0f}"),
        ("requested time present", f"{int((~np.isnan(jobs.requested_time_s)).sum())}"),
        ("GPU-type constrained jobs", f"{typed}"),
        (
            "GPU counts",
            ", ".join(f"{s}:{c}" for s, c in list(zip(sizes, counts, strict=True))[:10]),
        ),
        ("skipped bad rows", f"{report.get('skipped_bad_rows', 0)}"),
        ("excluded", json.dumps(report.get("excluded", {}))),
    ]
    if cluster is not None:
        rows.append(("cluster", f"{len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs"))
    for key, value in rows:
        table.add_row(key, value)
    Console().print(table)


@app.command()
def synth(
    profile: str = typer.Option("helios", help="philly, helios or alibaba (Tables 2 and 4)."),
    jobs: int = typer.Option(2048, help="Number of jobs."),
    seed: int = typer.Option(0, help="Random seed."),
    out: Path = typer.Option(Path("runs/jobs/synthetic.csv"), help="RLTune 19-column CSV."),
) -> None:
    """Writes a seeded synthetic trace in RLTune's CSV format."""
    from hetsched.jobs.synthetic import PROFILES, generate
    from hetsched.jobs.traces.rltune_csv import write_rltune_csv

    table = generate(PROFILES.get(profile), jobs, seed=seed)
    write_rltune_csv(table, out)
    typer.echo(
        f"wrote {len(table)} {profile} jobs to {out} (mean run {table.run_time_s.mean():.0f} s,"
        f" {len(table) / max(table.submit_time_s[-1], 1):.4f} jobs/s)"
    )


@app.command()
def simulate(
    trace: Path | None = typer.Option(None, help="Trace file (or PAI 2020 folder)."),
    format: str = typer.Option("auto", "--format", help="Trace format (auto = from the name)."),
    synthetic: str | None = typer.Option(None, help="Use a synthetic profile instead."),
    jobs: int = typer.Option(2048, help="Jobs of the synthetic trace."),
    cluster: str | None = typer.Option(None, help="Built-in cluster name or a YAML file."),
    policy: str = typer.Option(DEFAULT_POLICIES, help="Comma-separated policies."),
    backfill: bool = typer.Option(False, "--backfill", help="EASY backfilling."),
    strict: bool = typer.Option(False, "--strict", help="Strict order: the head blocks."),
    compare_modes: bool = typer.Option(
        False, "--compare-modes", help="Run strict, committed, EASY and greedy each."
    ),
    modes_option: str | None = typer.Option(
        None, "--modes", help="Comma-separated queue modes: greedy, strict, committed, easy."
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
    import numpy as np
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from hetsched.jobs.cluster import map_virtual_clusters, with_speed_factors
    from hetsched.jobs.estimates import fill_requested_times
    from hetsched.jobs.policies import make_policy
    from hetsched.jobs.simulator import SimulationConfig
    from hetsched.jobs.windows import METRICS, WindowSummary, evaluate_windows, run_policy

    if backfill and strict:
        raise HetschedError("--backfill and --strict exclude each other")
    from hetsched.jobs.simulator import QUEUE_MODES

    modes = ["strict", "committed", "easy", "greedy"] if compare_modes else []
    if modes_option:
        modes = [m.strip() for m in modes_option.split(",") if m.strip()]
        unknown = [m for m in modes if m not in QUEUE_MODES]
        if unknown:
            raise HetschedError(f"unknown queue modes {unknown}; known: {', '.join(QUEUE_MODES)}")
    modes = modes or ["easy" if backfill else "strict" if strict else "greedy"]
    policies = [p.strip() for p in policy.split(",") if p.strip()]
    for name in policies:
        make_policy(name)  # unknown names and unreadable checkpoints fail before any work
    console = Console()
    table, trace_cluster, fmt, report = _load_jobs(
        trace, format, synthetic, jobs, seed, skip_bad_rows
    )
    the_cluster = _resolve_cluster(cluster, trace_cluster, fmt)
    if speed_factors:
        the_cluster = with_speed_factors(the_cluster)
    vc_mapping = map_virtual_clusters(
        table.virtual_cluster, table.run_time_s * np.maximum(table.num_gpus, 1), the_cluster
    )
    if any(k != v for k, v in vc_mapping.items()):
        vcs = np.array([vc_mapping.get(vc, vc) for vc in table.virtual_cluster.tolist()], object)
        table = table.with_columns(virtual_cluster=vcs)
        console.print(f"mapped {len(vc_mapping)} trace VCs onto {the_cluster.virtual_clusters}")
    table = fill_requested_times(table, estimate, seed)
    options = {"qssf": {"priority_file": str(priority_file)}} if priority_file else {}
    base = SimulationConfig(
        placer=placement, recompute_interval_s=recompute_interval_s, drop_unrunnable=drop_unrunnable
    )
    summaries: list[WindowSummary] = []
    timelines: dict = {}
    runs = len(modes) * len(policies) * max(windows, 1)
    out.mkdir(parents=True, exist_ok=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=runs)
        if windows > 0:
            summaries = evaluate_windows(
                table,
                the_cluster,
                policies,
                modes,
                window_size=window_size,
                count=windows,
                seed=seed,
                base_config=base,
                policy_options=options,
                on_run=lambda: progress.advance(task),
            )
        else:
            for mode in modes:
                config = SimulationConfig(
                    queue_mode=mode,  # type: ignore[arg-type]
                    placer=placement,
                    recompute_interval_s=recompute_interval_s,
                    drop_unrunnable=drop_unrunnable,
                )
                for name in policies:
                    result = run_policy(table, the_cluster, name, config, options.get(name))
                    result.write_csv(out / f"jobs_{Path(name).stem}_{mode}.csv")
                    timelines[f"{name}/{mode}"] = result
                    s = result.summary()
                    summaries.append(
                        WindowSummary(
                            name,
                            mode,
                            0,
                            {m: s[m] for m in METRICS},
                            [s["bsld"]],
                            result.wait_s[result.finished],
                        )
                    )
                    progress.advance(task)
    title = f"{trace.name if trace else synthetic} on {the_cluster.name}"
    if windows:
        title += f" ({windows} windows of {window_size} jobs, seed {seed})"
    view = Table(title=title)
    for column in ("policy", "mode", "BSLD", "wait (s)", "JCT (s)", "GPU util (%)", "makespan"):
        view.add_column(column, justify="left" if column in ("policy", "mode") else "right")
    rows = []
    for w in summaries:
        m = w.means
        view.add_row(
            w.policy,
            w.queue_mode,
            f"{m['bsld']:.2f}",
            f"{m['wait_s']:.1f}",
            f"{m['jct_s']:.1f}",
            f"{m['utilisation_pct']:.2f}",
            f"{m['makespan_s']:.0f}",
        )
        rows.append({"policy": w.policy, "queue_mode": w.queue_mode, **m})
    console.print(view)
    payload = {
        "trace": str(trace) if trace else None,
        "synthetic": synthetic,
        "load_report": report,
        "cluster": the_cluster.describe(),
        "estimate": estimate,
        "placement": placement,
        "virtual_cluster_mapping": vc_mapping,
        "windows": windows,
        "window_size": window_size,
        "seed": seed,
        "results": rows,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    with (out / "results.csv").open("w") as handle:
        handle.write("policy,queue_mode," + ",".join(METRICS) + "\n")
        for r in rows:
            values = ",".join(f"{r[m]:.6g}" for m in METRICS)
            handle.write(f"{r['policy']},{r['queue_mode']},{values}\n")
    _plot_wait_cdf(summaries, out / "wait_cdf.png", np)
    saved = "results.json, results.csv, wait_cdf.png"
    if timelines:
        _plot_utilisation(timelines, out / "utilisation.png")
        saved += ", utilisation.png, jobs_<policy>_<mode>.csv"
    console.print(f"saved in {out}: {saved}")


def _plot_wait_cdf(summaries, path: Path, np) -> None:
    """Wait-time CDF per policy and mode (the paper's Fig. 12 view)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_prop_cycle(color=plt.cm.tab20.colors)  # up to 20 distinct policy/mode lines
    for w in summaries:
        waits = np.sort(np.maximum(w.waits_s, 1.0))
        if len(waits):
            ax.plot(
                waits, np.arange(1, len(waits) + 1) / len(waits), label=f"{w.policy}/{w.queue_mode}"
            )
    ax.set_xscale("log")
    ax.set_xlabel("wait time (s, values < 1 s shown at 1 s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_utilisation(results: dict, path: Path) -> None:
    """Busy GPUs / cluster GPUs over time, one step line per policy and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, result in results.items():
        hours = (result.utilisation_time_s - result.utilisation_time_s[0]) / 3600.0
        share = 100.0 * result.utilisation_busy_gpus / result.cluster.total_gpus
        ax.step(hours, share, where="post", label=label, linewidth=0.8)
    ax.set_xlabel("time since first arrival (h)")
    ax.set_ylabel("GPUs busy (%)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


from hetsched.jobs.slurm.cli import register as register_slurm  # noqa: E402 (issue 9)

register_slurm(app)

from hetsched.jobs.rl_cli import register as register_rl  # noqa: E402 (issue 6)

register_rl(app)
