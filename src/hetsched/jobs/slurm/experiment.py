"""Section 5.6 scaled to one machine: three arms on a private Slurm, each run several times.

The paper submitted one synthetic batch to Slurm's weight-tuned multifactor scheduler and to the
RLTune-equipped one "under identical conditions" and compared makespan, GPU utilisation and mean
wait (Figs. 18-19). Here every run gets a fresh private Slurm (:class:`.local.LocalSlurm`, one or
several nodes with fake GPUs) and the same scaled workload, submitted at the same arrival times:

- ``fifo``: ``priority/basic``, Slurm's default (first come, first served, with backfill);
- ``multifactor``: ``priority/multifactor`` with every weight 1000, the paper's baseline;
- ``hetsched``: multifactor plus the adapter re-ranking pending jobs every ``interval_s``.

Each arm runs ``repeats`` times, interleaved (fifo, multifactor, hetsched, fifo, ...) so that a
slow spell of the shared machine does not land on one arm; :mod:`.experiment_stats` gives the
mean and spread and says which differences exceed it. The harness rides out a slurmctld restart
(a failed read is retried until the deadline) and records jobs that ended in TIMEOUT or other
final states instead of raising. Each arm is also simulated once (deterministic; EASY
backfilling, which is what ``sched/backfill`` approximates): FCFS for ``fifo``, the multifactor
model as this Slurm computes it for ``multifactor`` (age and fair share are 0: fair share needs
slurmdbd, minutes of age are nothing against the 7-day ``PriorityMaxAge``), and the policy
recomputed every ``interval_s`` for ``hetsched``.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hetsched.core.errors import DataError, HetschedError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.placement.placers import Placer
from hetsched.jobs.policies.heuristics import SlurmMultifactor, make_policy
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.slurm.adapter import AdapterConfig, SlurmAdapter
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError
from hetsched.jobs.slurm.experiment_stats import METRICS, Comparison, Spread, compare, spread_of
from hetsched.jobs.slurm.local import LocalSlurm
from hetsched.jobs.slurm.local_config import LocalClusterSpec
from hetsched.jobs.slurm.records import SlurmJob
from hetsched.jobs.slurm.scan_report import ScanReport
from hetsched.jobs.slurm.workload import submit_workload
from hetsched.jobs.traces.job_table import JobTable

log = logging.getLogger("hetsched.jobs.slurm")

#: Job states after which a job holds no resources and will not start again.
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


@dataclass(frozen=True)
class Arm:
    """One arm of the experiment.

    Attributes:
        name: ``fifo``, ``multifactor`` or ``hetsched``.
        priority_type: Slurm's priority plugin for the live runs.
        policy: The adapter's policy (None: Slurm alone).
        simulated_policy: What the simulated twin orders the queue by.
    """

    name: str
    priority_type: str
    policy: PriorityPolicy | None
    simulated_policy: PriorityPolicy


def slurm_baseline_policy() -> SlurmMultifactor:
    """Multifactor as the local Slurm computes it: equal weights, age and fair-share at 0."""
    return SlurmMultifactor(w_age=0.0, w_fairshare=0.0)


def experiment_arms(policy: PriorityPolicy) -> list[Arm]:
    """The three arms: Slurm's default FIFO, the paper's multifactor baseline, and hetsched."""
    return [
        Arm("fifo", "priority/basic", None, make_policy("fcfs")),
        Arm("multifactor", "priority/multifactor", None, slurm_baseline_policy()),
        Arm("hetsched", "priority/multifactor", policy, policy),
    ]


@dataclass
class ArmResult:
    """One run of one arm.

    Attributes:
        arm: The arm's name.
        mode: ``live`` or ``simulated``.
        repeat: Run number of this arm (0-based).
        makespan_s: Last end minus first submission (jobs that started).
        mean_wait_s: Mean of start minus submit (jobs that started).
        gpu_utilisation_pct: Busy GPU-seconds / (GPUs x makespan), in %.
        start_order: Workload row indices of the started jobs in order of start (ties by row).
        priority_changes: ``scontrol`` priority updates applied (live hetsched arm only).
        oversubscribe_changes: OverSubscribe updates applied (live hetsched arm with a placer).
        final_states: Jobs per final Slurm state (live; e.g. ``{"COMPLETED": 63, "TIMEOUT": 1}``).
        never_started: Jobs that ended without starting (left out of the metrics).
        adapter_error: Why the adapter stopped early, if it did.
        wall_s: Wall-clock seconds the run took.
    """

    arm: str
    mode: str
    repeat: int
    makespan_s: float
    mean_wait_s: float
    gpu_utilisation_pct: float
    start_order: list[int] = field(default_factory=list)
    priority_changes: int = 0
    oversubscribe_changes: int = 0
    final_states: dict[str, int] = field(default_factory=dict)
    never_started: int = 0
    adapter_error: str | None = None
    wall_s: float = 0.0


def arm_metrics(
    submit_s: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray, total: int
) -> tuple[float, float, float]:
    """(makespan, mean wait, GPU utilisation %) of one run, as the paper's Figs. 18-19 define
    them; NaN for a run without jobs."""
    if len(submit_s) == 0:
        return math.nan, math.nan, math.nan
    makespan = float(end_s.max() - submit_s.min())
    wait = float(np.mean(start_s - submit_s))
    busy = float(np.sum(gpus * (end_s - start_s)))
    return makespan, wait, 100.0 * busy / (total * makespan) if makespan > 0 else 0.0


def twin_cluster(spec: LocalClusterSpec) -> Cluster:
    """The simulated twin of a :class:`LocalSlurm` cluster."""
    nodes = [
        Node(n, "gpu", g, float(spec.cpus))
        for n, g in zip(spec.node_names, spec.node_gpus, strict=True)
    ]
    return Cluster(nodes, name="local-" + "-".join(str(g) for g in spec.node_gpus))


def simulate_arm(
    workload: JobTable, arm: Arm, spec: LocalClusterSpec, recompute_interval_s: float | None
) -> ArmResult:
    """The simulated run of one arm (EASY backfilling, pack placement)."""
    config = SimulationConfig(queue_mode="easy", recompute_interval_s=recompute_interval_s)
    start = time.perf_counter()
    result = Simulator(workload, twin_cluster(spec), arm.simulated_policy, config).run()
    makespan, wait, util = arm_metrics(
        workload.submit_time_s, result.start_s, result.end_s, workload.num_gpus, sum(spec.node_gpus)
    )
    order = np.lexsort((np.arange(len(workload)), result.start_s)).tolist()
    wall = time.perf_counter() - start
    return ArmResult(arm.name, "simulated", 0, makespan, wait, util, order, wall_s=wall)


def wait_until_done(
    client: SlurmClient,
    ids: list[int],
    timeout_s: float,
    poll_s: float = 0.5,
    lost_after_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[int, SlurmJob | None]:
    """Every job of ``ids`` in its final state, or None for a job the controller lost.

    A job's final record is kept the first time it is seen, so one that Slurm later purges from
    ``squeue`` (``MinJobAge``) still counts. A failed read (slurmctld restarting, a malformed
    answer) is logged once per outage and retried. A job missing from ``lost_after_s`` of
    successful reads (a controller killed before it saved the job) is recorded as lost.

    Raises:
        HetschedError: If jobs are still unfinished after ``timeout_s``.
    """
    start = clock()
    deadline = start + timeout_s
    found: dict[int, SlurmJob | None] = {}
    last_seen = dict.fromkeys(ids, start)
    failing = False
    while clock() < deadline:
        try:
            listed = {j.job_id: j for j in client.jobs() if j.job_id in last_seen}
        except (SlurmCommandError, DataError) as error:
            if not failing:
                log.warning("reading the queue failed, retrying: %s", error)
            failing = True
        else:
            if failing:
                log.info("the queue answers again")
            failing = False
            now = clock()
            for job_id in [i for i in ids if i not in found]:
                job = listed.get(job_id)
                if job is not None:
                    last_seen[job_id] = now
                    if job.state in FINAL_STATES:
                        found[job_id] = job
                elif now - last_seen[job_id] >= lost_after_s:
                    log.warning("job %d is gone from the controller; recorded as lost", job_id)
                    found[job_id] = None
            if len(found) == len(ids):
                return found
        sleep(poll_s)
    unfinished = len(ids) - len(found)
    raise HetschedError(f"{unfinished} of {len(ids)} jobs still unfinished after {timeout_s:g} s")


class _AdapterThread:
    """The adapter's loop in a thread, its applied priority updates counted, its error kept."""

    def __init__(self, adapter: SlurmAdapter) -> None:
        self.adapter = adapter
        self.stop = threading.Event()
        self.applied: Counter[str] = Counter()
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _count(self, report: ScanReport) -> None:
        self.applied.update(c.what for c in report.changes if c.outcome == "applied")

    def _run(self) -> None:
        try:
            self.adapter.run(stop=self.stop, on_scan=self._count)
        except HetschedError as error:
            self.error = str(error)
            log.error("the adapter stopped: %s", error)


def run_live_arm(
    workload: JobTable,
    arm: Arm,
    spec: LocalClusterSpec,
    interval_s: float,
    root: Path,
    timeout_s: float,
    repeat: int = 0,
    placer: Placer | None = None,
) -> ArmResult:
    """Submits the workload to a fresh local Slurm (with the adapter running when the arm has a
    policy) and measures the outcome from Slurm's own submit/start/end times."""
    start = time.perf_counter()
    with LocalSlurm(root, spec) as slurm:
        client = slurm.client()
        loop = None
        if arm.policy is not None:
            config = AdapterConfig(
                interval_s=interval_s, trust_requested_comment=True, placer=placer
            )
            loop = _AdapterThread(SlurmAdapter(client, arm.policy, config))
            loop.thread.start()
        try:
            ids = submit_workload(client, workload)
            done = wait_until_done(client, ids, timeout_s)
        finally:
            if loop is not None:
                loop.stop.set()
                loop.thread.join(timeout=30)
    outcome = live_outcome([done[i] for i in ids], workload.num_gpus, sum(spec.node_gpus))
    return ArmResult(
        arm.name,
        "live",
        repeat,
        *outcome.metrics,
        outcome.start_order,
        priority_changes=0 if loop is None else loop.applied["priority"],
        oversubscribe_changes=0 if loop is None else loop.applied["oversubscribe"],
        final_states=outcome.final_states,
        never_started=outcome.never_started,
        adapter_error=None if loop is None else loop.error,
        wall_s=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class LiveOutcome:
    """What Slurm's own times say about one live run.

    Attributes:
        metrics: (makespan, mean wait, GPU utilisation %) over the jobs that started (a job that
            hit its limit, TIMEOUT, counts with the time it ran).
        start_order: Workload rows of the started jobs in order of start (ties by row).
        final_states: Jobs per final state (``LOST`` for jobs the controller lost).
        never_started: Jobs that ended without a known start (left out of the metrics).
    """

    metrics: tuple[float, float, float]
    start_order: list[int]
    final_states: dict[str, int]
    never_started: int


def live_outcome(jobs: list[SlurmJob | None], gpus: np.ndarray, total_gpus: int) -> LiveOutcome:
    """The outcome of a run from its jobs in workload order (None: lost) and their GPU counts."""
    started = np.array([j is not None and j.start_time_s > 0 for j in jobs], dtype=bool)
    rows = np.flatnonzero(started)
    times = np.array(
        [[0.0] * 3 if j is None else [j.submit_time_s, j.start_time_s, j.end_time_s] for j in jobs]
    ).reshape(-1, 3)
    metrics = arm_metrics(
        times[rows, 0], times[rows, 1], times[rows, 2], np.asarray(gpus)[rows], total_gpus
    )
    order = rows[np.lexsort((rows, times[rows, 1]))].tolist()
    states = dict(Counter("LOST" if j is None else j.state for j in jobs))
    return LiveOutcome(metrics, order, states, int((~started).sum()))


def run_experiment(
    workload: JobTable,
    policy: PriorityPolicy,
    interval_s: float,
    spec: LocalClusterSpec,
    repeats: int = 3,
    live: bool = True,
    root: Path | None = None,
    timeout_s: float = 900.0,
    placer: Placer | None = None,
) -> list[ArmResult]:
    """Every arm simulated once and (with ``live``) run ``repeats`` times on a local Slurm."""
    if repeats < 1:
        raise HetschedError(f"repeats must be >= 1, got {repeats}")
    arms = experiment_arms(policy)
    results = [
        simulate_arm(workload, arm, spec, interval_s if arm.policy is not None else None)
        for arm in arms
    ]
    if live:
        with tempfile.TemporaryDirectory(prefix="hetsched-slurm-", dir=root) as scratch:
            for repeat in range(repeats):
                for arm in arms:
                    folder = Path(scratch) / f"{arm.name}-{repeat}"
                    results.append(
                        run_live_arm(
                            workload, arm, spec, interval_s, folder, timeout_s, repeat, placer
                        )
                    )
                    log.info("%s run %d done", arm.name, repeat + 1)
    return results


def summarise(results: list[ArmResult]) -> dict[tuple[str, str], dict[str, Spread]]:
    """(arm, mode) -> metric -> spread over that arm's runs, in the order the arms appear."""
    summary: dict[tuple[str, str], dict[str, Spread]] = {}
    for key in dict.fromkeys((r.arm, r.mode) for r in results):
        runs = [r for r in results if (r.arm, r.mode) == key]
        summary[key] = {m: spread_of([getattr(r, m) for r in runs]) for m in METRICS}
    return summary


def comparisons(
    summary: dict[tuple[str, str], dict[str, Spread]], arm: str = "hetsched"
) -> list[Comparison]:
    """``arm`` against every other arm, per mode and metric."""
    found = []
    for (other, mode), spreads in summary.items():
        ours = summary.get((arm, mode))
        if other == arm or ours is None:
            continue
        found += [compare(arm, ours[m], other, spreads[m], m, mode) for m in METRICS]
    return found


def write_results(
    path: Path,
    results: list[ArmResult],
    summary: dict[tuple[str, str], dict[str, Spread]],
    found: list[Comparison],
    settings: dict,
) -> None:
    """Saves the settings, every run, the spreads and the comparisons as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "settings": settings,
        "results": [asdict(r) for r in results],
        "summary": [
            {"arm": arm, "mode": mode, **{m: asdict(s) for m, s in spreads.items()}}
            for (arm, mode), spreads in summary.items()
        ],
        "comparisons": [asdict(c) for c in found],
    }
    path.write_text(json.dumps(payload, indent=2))
