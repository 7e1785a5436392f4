"""Section 5.6 scaled to one machine: Slurm's multifactor priority alone vs hetsched's priorities.

The paper submitted one synthetic batch to Slurm's weight-tuned multifactor scheduler and to the
RLTune-equipped one "under identical conditions" and compared makespan, GPU utilisation and mean
wait (Figs. 18-19). Here each arm gets a fresh private Slurm (:class:`.local.LocalSlurm`, one node,
fake GPUs), the same scaled workload submitted at the same arrival times, and:

- ``slurm``: no adapter; Slurm orders the queue by its multifactor priority;
- ``hetsched``: the adapter re-ranks pending jobs every ``interval_s`` with the chosen policy.

Each arm is also simulated (the simulator with EASY backfilling, which is what ``sched/backfill``
approximates): the baseline with the multifactor model as this Slurm computes it (age and
fair-share are 0: fair share needs slurmdbd, and minutes of age are nothing against the 7-day
``PriorityMaxAge``; so only job size and partition weigh), hetsched's arm with
priorities recomputed every ``interval_s`` as the live loop does. Live and simulated figures can
then be compared row by row.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.policies.heuristics import SlurmMultifactor
from hetsched.jobs.policies.queue_state import PriorityPolicy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.slurm.adapter import AdapterConfig, SlurmAdapter
from hetsched.jobs.slurm.client import SlurmClient
from hetsched.jobs.slurm.local import LocalSlurm
from hetsched.jobs.slurm.local_config import LocalClusterSpec
from hetsched.jobs.slurm.workload import submit_workload
from hetsched.jobs.traces.job_table import JobTable

#: Job states after which a job holds no resources and will not start again.
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
)


@dataclass
class ArmResult:
    """One arm's outcome.

    Attributes:
        arm: ``slurm`` or ``hetsched``.
        mode: ``live`` or ``simulated``.
        makespan_s: Last end minus first submission.
        mean_wait_s: Mean of start minus submit.
        gpu_utilisation_pct: Busy GPU-seconds / (GPUs x makespan), in %.
        start_order: Workload row indices in order of start time (ties by row).
        priority_changes: ``scontrol`` priority updates applied (live hetsched arm only).
        wall_s: Wall-clock seconds the arm took.
    """

    arm: str
    mode: str
    makespan_s: float
    mean_wait_s: float
    gpu_utilisation_pct: float
    start_order: list[int] = field(default_factory=list)
    priority_changes: int = 0
    wall_s: float = 0.0


def arm_metrics(
    submit_s: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray, total: int
) -> tuple[float, float, float]:
    """(makespan, mean wait, GPU utilisation %) of one run, as the paper's Figs. 18-19 define
    them."""
    makespan = float(end_s.max() - submit_s.min())
    wait = float(np.mean(start_s - submit_s))
    busy = float(np.sum(gpus * (end_s - start_s)))
    return makespan, wait, 100.0 * busy / (total * makespan) if makespan > 0 else 0.0


def single_node_cluster(gpus: int, cpus: int) -> Cluster:
    """The simulated twin of :class:`LocalSlurm`'s node."""
    return Cluster([Node("localhost", "gpu", gpus, float(cpus))], name=f"local-{gpus}gpu")


def slurm_baseline_policy() -> SlurmMultifactor:
    """Multifactor as the local Slurm computes it: equal weights, age and fair-share at 0."""
    return SlurmMultifactor(w_age=0.0, w_fairshare=0.0)


def simulate_arm(
    workload: JobTable,
    arm: str,
    policy: PriorityPolicy,
    gpus: int,
    cpus: int,
    recompute_interval_s: float | None,
) -> ArmResult:
    """The simulated run of one arm (EASY backfilling, pack placement on one node)."""
    config = SimulationConfig(queue_mode="easy", recompute_interval_s=recompute_interval_s)
    start = time.perf_counter()
    result = Simulator(workload, single_node_cluster(gpus, cpus), policy, config).run()
    makespan, wait, util = arm_metrics(
        workload.submit_time_s, result.start_s, result.end_s, workload.num_gpus, gpus
    )
    order = np.lexsort((np.arange(len(workload)), result.start_s)).tolist()
    return ArmResult(arm, "simulated", makespan, wait, util, order, 0, time.perf_counter() - start)


def _wait_until_done(client: SlurmClient, ids: list[int], timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    wanted = set(ids)
    while time.monotonic() < deadline:
        jobs = {j.job_id: j for j in client.jobs() if j.job_id in wanted}
        if len(jobs) == len(wanted) and all(j.state in FINAL_STATES for j in jobs.values()):
            return jobs
        time.sleep(0.5)
    raise HetschedError(f"jobs still unfinished after {timeout_s:g} s")


def run_live_arm(
    workload: JobTable,
    arm: str,
    policy: PriorityPolicy | None,
    interval_s: float,
    gpus: int,
    cpus: int,
    root: Path,
    timeout_s: float,
) -> ArmResult:
    """Submits the workload to a fresh local Slurm, with the adapter running when ``policy`` is
    given, and measures the outcome from Slurm's own submit/start/end times."""
    start = time.perf_counter()
    with LocalSlurm(root, LocalClusterSpec((gpus,), cpus)) as slurm:
        client = slurm.client()
        stop = threading.Event()
        changes: list[int] = []
        loop = None
        if policy is not None:
            config = AdapterConfig(interval_s=interval_s, trust_requested_comment=True)
            adapter = SlurmAdapter(client, policy, config)
            loop = threading.Thread(
                target=adapter.run,
                kwargs={
                    "stop": stop,
                    "on_scan": lambda r: changes.append(
                        sum(c.what == "priority" and c.outcome == "applied" for c in r.changes)
                    ),
                },
                daemon=True,
            )
            loop.start()
        try:
            ids = submit_workload(client, workload)
            done = _wait_until_done(client, ids, timeout_s)
        finally:
            stop.set()
            if loop is not None:
                loop.join(timeout=30)
        jobs = [done[i] for i in ids]
    submit = np.array([j.submit_time_s for j in jobs])
    started = np.array([j.start_time_s for j in jobs])
    ended = np.array([j.end_time_s for j in jobs])
    failed = [j.job_id for j in jobs if j.state != "COMPLETED"]
    if failed:
        raise HetschedError(f"{len(failed)} jobs did not complete (first: {failed[0]})")
    makespan, wait, util = arm_metrics(submit, started, ended, workload.num_gpus, gpus)
    order = np.lexsort((np.arange(len(jobs)), started)).tolist()
    wall = time.perf_counter() - start
    return ArmResult(arm, "live", makespan, wait, util, order, sum(changes), wall)


def run_experiment(
    workload: JobTable,
    policy: PriorityPolicy,
    interval_s: float,
    gpus: int = 4,
    cpus: int = 4,
    live: bool = True,
    root: Path | None = None,
    timeout_s: float = 900.0,
) -> list[ArmResult]:
    """Both arms, simulated and (with ``live``) on a real local Slurm."""
    results = [
        simulate_arm(workload, "slurm", slurm_baseline_policy(), gpus, cpus, None),
        simulate_arm(workload, "hetsched", policy, gpus, cpus, interval_s),
    ]
    if live:
        with tempfile.TemporaryDirectory(prefix="hetsched-slurm-", dir=root) as scratch:
            for arm, arm_policy in (("slurm", None), ("hetsched", policy)):
                results.append(
                    run_live_arm(
                        workload,
                        arm,
                        arm_policy,
                        interval_s,
                        gpus,
                        cpus,
                        Path(scratch) / arm,
                        timeout_s,
                    )
                )
    return results


def write_results(path: Path, results: list[ArmResult], settings: dict) -> None:
    """Saves the settings and every arm's result as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"settings": settings, "results": [asdict(r) for r in results]}
    path.write_text(json.dumps(payload, indent=2))
