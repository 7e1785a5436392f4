"""A loaded trace's statistics as the paper's Table 2 reports them, plus what the loader left
out; ``hetsched jobs trace-info`` prints them."""

from __future__ import annotations

import json

import numpy as np

from hetsched.jobs.traces.source import LoadedJobs

SECONDS_PER_DAY = 86400.0
#: GPU counts listed by name before the rest are left out of the summary line.
GPU_COUNTS_SHOWN = 10


def trace_statistics(loaded: LoadedJobs) -> list[tuple[str, str]]:
    """(statistic, formatted value) rows: jobs, users, span, arrival rate, run times, requested
    times present, GPU-type constrained jobs, GPU counts, skipped and excluded rows, cluster."""
    jobs, report = loaded.jobs, loaded.report
    span_s = float(jobs.submit_time_s[-1] - jobs.submit_time_s[0])
    sizes, counts = np.unique(jobs.num_gpus, return_counts=True)
    pairs = list(zip(sizes.tolist(), counts.tolist(), strict=True))[:GPU_COUNTS_SHOWN]
    rows = [
        ("jobs", f"{len(jobs)}"),
        ("users", f"{len(set(jobs.user.tolist()))}"),
        ("span (days)", f"{span_s / SECONDS_PER_DAY:.2f}"),
        ("arrival rate (jobs/s)", f"{(len(jobs) - 1) / span_s:.6f}" if span_s > 0 else "-"),
        ("mean run time (s)", f"{jobs.run_time_s.mean():.1f}"),
        ("max run time (s)", f"{jobs.run_time_s.max():.0f}"),
        ("requested time present", f"{int((~np.isnan(jobs.requested_time_s)).sum())}"),
        ("GPU-type constrained jobs", f"{sum(1 for t in jobs.gpu_types if t)}"),
        ("GPU counts", ", ".join(f"{size}:{count}" for size, count in pairs)),
        ("skipped bad rows", f"{report.get('skipped_bad_rows', 0)}"),
        ("excluded", json.dumps(report.get("excluded", {}))),
    ]
    if loaded.cluster is not None:
        cluster = loaded.cluster
        rows.append(("cluster", f"{len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs"))
    return rows
