"""`hetsched jobs slurm`, `slurm-submit` and `slurm-experiment`: RLTune's live Slurm mode
(:mod:`hetsched.jobs.slurm`)."""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from hetsched.core.errors import HetschedError
from hetsched.jobs.cli.option_groups import TRACE_HELP, option_group
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.rl.policy import policy_by_name
from hetsched.jobs.slurm.adapter import AdapterConfig, ScanReport, SlurmAdapter
from hetsched.jobs.slurm.client import SlurmClient
from hetsched.jobs.slurm.experiment import (
    comparisons,
    run_experiment,
    summarise,
    write_results,
)
from hetsched.jobs.slurm.experiment_stats import Spread
from hetsched.jobs.slurm.local_config import LocalClusterSpec
from hetsched.jobs.slurm.priorities import PriorityRange
from hetsched.jobs.slurm.workload import (
    WorkloadScale,
    scale_workload,
    submit_requests,
    submit_workload,
)
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import JobTable
from hetsched.jobs.traces.source import load_jobs

SCALE_HELP = "Scaled run times lie in [--min-run-s, --max-run-s] (log-linear map of the trace's)."


@dataclass(frozen=True)
class WorkloadOptions:
    """The workload flags of ``slurm-submit`` and ``slurm-experiment``, declared once so that
    both commands build the same scaled workload from the same flags."""

    synthetic: Annotated[str | None, typer.Option(help="Synthetic profile (or --trace).")] = (
        "philly"
    )
    trace: Annotated[Path | None, typer.Option(help=TRACE_HELP + " A window of it is used.")] = None
    trace_format: Annotated[str, typer.Option("--format", help="Trace format.")] = "auto"
    start: Annotated[int, typer.Option(help="First job of the trace window.")] = 0
    jobs: Annotated[int, typer.Option(help="Jobs in the workload.")] = 64
    seed: Annotated[int, typer.Option(help="Seed of the synthetic trace and estimates.")] = 0
    estimate: Annotated[str, typer.Option(help="Requested-time model.")] = "auto"
    min_run_s: Annotated[float, typer.Option(help=SCALE_HELP)] = 1.0
    max_run_s: Annotated[float, typer.Option(help=SCALE_HELP)] = 12.0
    arrival_span_s: Annotated[float, typer.Option(help="Last arrival (0 = all at once).")] = 20.0

    @property
    def profile(self) -> str | None:
        """The synthetic profile in use: none once --trace replaces the default one."""
        return None if self.trace is not None else self.synthetic

    def load(self, max_gpus: int) -> JobTable:
        """A synthetic trace or a window of a real one, with requested times, on the scaled
        axis; GPU counts are clipped to 1..``max_gpus`` so every job fits the target node."""
        table = load_jobs(self.trace, self.trace_format, self.profile, self.jobs, self.seed).jobs
        if self.trace is not None:
            if not 0 <= self.start < len(table):
                raise HetschedError(
                    f"--start {self.start} is outside the trace's {len(table)} jobs"
                )
            table = table.window(self.start, min(self.jobs, len(table) - self.start))
        table = fill_requested_times(table, self.estimate, self.seed)
        scale = WorkloadScale(self.min_run_s, self.max_run_s, self.arrival_span_s, max_gpus)
        return scale_workload(table, scale)


def _configure_logging(log_file: Path | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    logger = logging.getLogger("hetsched.jobs.slurm")
    logger.handlers.clear()
    for handler in handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def slurm(
    policy: str = typer.Option(..., help="Priority policy name, or an RLTune checkpoint."),
    interval: float = typer.Option(60.0, "--interval", help="Seconds between scans."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Log planned changes only."),
    restore: bool = typer.Option(
        False, "--restore", help="On exit, hand touched jobs back to Slurm's own priority."
    ),
    partition: str | None = typer.Option(None, help="Only this partition's jobs and nodes."),
    user: str | None = typer.Option(None, help="Only this user's jobs."),
    trust_requested_comment: bool = typer.Option(
        False,
        "--trust-requested-comment",
        help="Read the hetsched:requested_s= claim in job comments (as slurm-submit writes it;"
        " only within the time limit's last minute); off, the time limit is the requested time.",
    ),
    placer: str | None = typer.Option(
        None, help="Placer for oversubscribe advice (pack, spread, milp); none = no advice."
    ),
    advice_top_k: int = typer.Option(8, help="Advise only the K best-ranked jobs."),
    top_priority: int | None = typer.Option(
        None,
        help="Priority of the best-ranked job (default: just above what Slurm's own priority"
        " plugin hands out, read from scontrol show config).",
    ),
    priority_step: int = typer.Option(100, help="Priority gap between ranks."),
    retries: int = typer.Option(2, help="Retries of a failed scontrol call per scan."),
    max_scans: int | None = typer.Option(None, help="Stop after this many scans."),
    connect_timeout_s: float = typer.Option(
        30.0, help="Wait this long for slurmctld at the start, then exit with an error."
    ),
    max_outage_s: float = typer.Option(
        300.0, help="Exit with an error when no scan succeeded for this long."
    ),
    until_idle: bool = typer.Option(False, help="Stop when no matching job is left."),
    slurm_conf: Path | None = typer.Option(None, help="SLURM_CONF for the commands."),
    log_file: Path | None = typer.Option(None, help="Also write the change log here."),
) -> None:
    """Scans the queue every --interval s, scores pending jobs with the policy and applies the
    priorities with `scontrol update jobid=N priority=M` (section 3.1.2)."""
    if interval <= 0:
        raise HetschedError(f"--interval must be > 0 s, got {interval}")
    _configure_logging(log_file)
    config = AdapterConfig(
        interval_s=interval,
        dry_run=dry_run,
        partition=partition,
        user=user,
        trust_requested_comment=trust_requested_comment,
        priority_range=None if top_priority is None else PriorityRange(top_priority, priority_step),
        priority_step=priority_step,
        placer=PLACERS.create(placer) if placer else None,
        advice_top_k=advice_top_k,
        retries=retries,
        connect_timeout_s=connect_timeout_s,
        max_outage_s=max_outage_s,
    )
    adapter = SlurmAdapter(SlurmClient(slurm_conf=slurm_conf), policy_by_name(policy), config)
    applied = 0

    def count(report: ScanReport) -> None:
        nonlocal applied
        applied += sum(c.outcome == "applied" for c in report.changes)

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # restore on kill, too
    try:
        scans = adapter.run(max_scans, until_idle, restore, on_scan=count)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return
    finally:
        signal.signal(signal.SIGTERM, previous)
    mode = "dry run, nothing applied" if dry_run else f"{applied} changes applied"
    left_out = adapter.tally.summary()
    typer.echo(f"{scans} scans, {mode}" + (f"; {left_out}" if left_out else ""))


@option_group("workload", jobs="Jobs to submit.")
def slurm_submit(
    workload: WorkloadOptions = WorkloadOptions(),
    max_gpus: int = typer.Option(4, help="GPU counts are clipped to 1..this."),
    partition: str | None = typer.Option(None, help="Partition to submit to."),
    slurm_conf: Path | None = typer.Option(None, help="SLURM_CONF for sbatch."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the sbatch lines only."),
) -> None:
    """Submits a scaled trace as `sleep` jobs (`--gres=gpu:k`, `--time`) at their arrival
    times."""
    table = workload.load(max_gpus)
    if dry_run:
        for arrival, request in zip(
            table.submit_time_s.tolist(), submit_requests(table, partition), strict=True
        ):
            typer.echo(f"t={arrival:7.3f}s " + " ".join(request.argv()))
        return
    ids = submit_workload(SlurmClient(slurm_conf=slurm_conf), table, partition)
    gpu_s = float((table.run_time_s * table.num_gpus).sum())
    typer.echo(
        f"submitted {len(ids)} jobs (ids {ids[0]}-{ids[-1]}), {gpu_s:.0f} GPU-seconds of sleep"
    )


def _parse_node_gpus(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise HetschedError(
            f"--node-gpus must be comma-separated whole numbers, got {text!r}"
        ) from None


def _cell(spread: Spread) -> str:
    if spread.runs <= 1:
        return f"{spread.mean:.1f}"
    return f"{spread.mean:.1f} ± {spread.std:.1f} [{spread.low:.1f}-{spread.high:.1f}]"


@option_group("workload")
def slurm_experiment(
    policy: str = typer.Option("sjf", help="hetsched's policy (name or checkpoint)."),
    interval: float = typer.Option(1.0, "--interval", help="Adapter scan interval (s)."),
    workload: WorkloadOptions = WorkloadOptions(),
    node_gpus: str = typer.Option(
        "4", help="Fake GPUs per node of the local Slurm, comma-separated (4,2,2,1 = four nodes)."
    ),
    repeats: int = typer.Option(3, help="Live runs per arm (interleaved across arms)."),
    placer: str | None = typer.Option(
        None, help="hetsched arm: placer for oversubscribe advice (pack, spread, milp)."
    ),
    simulate_only: bool = typer.Option(False, help="Skip the live runs (no Slurm needed)."),
    timeout_s: float = typer.Option(900.0, help="Per live run."),
    out: Path = typer.Option(Path("runs/jobs/slurm-experiment"), help="Output folder."),
) -> None:
    """Section 5.6 scaled: Slurm's FIFO (priority/basic), Slurm's multifactor, and hetsched's
    priorities, each on a fresh private Slurm with fake GPUs, --repeats times, and simulated
    once; mean ± std [min-max] of makespan, mean wait and GPU utilisation, and which
    differences exceed the spread."""
    spec = LocalClusterSpec(node_gpus=_parse_node_gpus(node_gpus), cpus=4)
    table = workload.load(max(spec.node_gpus))
    results = run_experiment(
        table,
        policy_by_name(policy),
        interval,
        spec,
        repeats=repeats,
        live=not simulate_only,
        timeout_s=timeout_s,
        placer=PLACERS.create(placer) if placer else None,
    )
    summary = summarise(results)
    found = comparisons(summary)
    title = f"{len(table)} jobs on GPUs {node_gpus}, {policy} every {interval:g} s"
    view = Table(title=title)
    for column in ("arm", "mode", "runs", "makespan (s)", "mean wait (s)", "GPU util (%)"):
        view.add_column(column, justify="left" if column in ("arm", "mode") else "right")
    for (arm, mode), spreads in summary.items():
        cells = [_cell(spreads[m]) for m in ("makespan_s", "mean_wait_s", "gpu_utilisation_pct")]
        view.add_row(arm, mode, str(spreads["makespan_s"].runs), *cells)
    console = Console(width=max(Console().width, 132))  # room for mean ± std [min-max] x 3
    console.print(view)
    verdicts = Table(title="hetsched against each baseline (gain/loss only beyond the spread)")
    for column in ("baseline", "metric", "change", "verdict"):
        verdicts.add_column(column)
    for c in found:
        unit = " pt" if c.metric == "gpu_utilisation_pct" else " %"
        verdicts.add_row(f"{c.baseline} ({c.mode})", c.metric, f"{c.change:+.1f}{unit}", c.verdict)
    console.print(verdicts)
    off = [r for r in results if r.mode == "live" and (r.never_started or r.adapter_error)]
    for r in off:
        typer.echo(
            f"{r.arm} run {r.repeat}: states {r.final_states}, {r.never_started} never started"
            + (f", adapter stopped: {r.adapter_error}" if r.adapter_error else "")
        )
    settings = {
        "policy": policy,
        "interval_s": interval,
        "node_gpus": list(spec.node_gpus),
        "repeats": repeats,
        "placer": placer,
        "workload": {
            "synthetic": workload.profile,
            "trace": str(workload.trace) if workload.trace else None,
            "start": workload.start,
            "jobs": len(table),
            "seed": workload.seed,
            "estimate": workload.estimate,
            "min_run_s": workload.min_run_s,
            "max_run_s": workload.max_run_s,
            "arrival_span_s": workload.arrival_span_s,
        },
        "gpu_seconds": float((table.run_time_s * table.num_gpus).sum()),
    }
    write_results(out / "results.json", results, summary, found, settings)
    typer.echo(f"saved {out / 'results.json'}")
