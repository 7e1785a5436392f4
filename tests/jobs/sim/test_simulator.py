"""Simulator invariants, queue modes, EASY's guarantee, speed factors, determinism, golden runs."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.catalog import CLUSTERS, homogeneous_pool, with_speed_factors
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.result import SimulationResult
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.sim.windows import evaluate_windows, run_policy, window_starts
from hetsched.jobs.traces import load_trace
from hetsched.jobs.traces.estimates import fill_requested_times
from hetsched.jobs.traces.job_table import Job, JobTable
from hetsched.jobs.traces.synthetic import generate


def _simulate(jobs, cluster, policy="fcfs", **config) -> SimulationResult:
    return Simulator(jobs, cluster, make_policy(policy), SimulationConfig(**config)).run()


def assert_invariants(result: SimulationResult) -> None:
    """Every job finishes once, none starts before it arrives, no node is ever over-allocated."""
    jobs = result.jobs
    assert result.finished.all()
    assert np.all(result.start_s >= jobs.submit_time_s)
    assert np.all(result.end_s >= result.start_s)
    capacity = {n.name: n.num_gpus for n in result.cluster.nodes}
    events = []
    for i, nodes in enumerate(result.nodes):
        for part in filter(None, nodes.split(";")):
            name, gpus = part.rsplit(":", 1)
            events.append((result.start_s[i], 1, name, int(gpus)))
            events.append((result.end_s[i], 0, name, -int(gpus)))  # releases first at a tie
    used: dict[str, int] = defaultdict(int)
    for _, _, name, delta in sorted(events):
        used[name] += delta
        assert 0 <= used[name] <= capacity[name], f"node {name} over-allocated"


def _tiny(rows) -> JobTable:
    """rows: (submit, run, gpus); requested time = run (oracle, explicit)."""
    jobs = [Job(f"j{i}", s, r, g, requested_time_s=r) for i, (s, r, g) in enumerate(rows)]
    return JobTable.from_jobs(jobs)


BLOCKED = [(0.0, 100.0, 3), (1.0, 50.0, 4), (2.0, 10.0, 1)]


def test_greedy_does_not_let_the_head_block_the_queue():
    pool = homogeneous_pool(4)
    greedy = _simulate(_tiny(BLOCKED), pool, queue_mode="greedy")
    strict = _simulate(_tiny(BLOCKED), pool, queue_mode="strict")
    assert greedy.start_s[2] == 2.0
    assert strict.start_s[2] == 150.0  # waits behind the 4-GPU job
    assert_invariants(greedy)
    assert_invariants(strict)


def test_committed_mode_keeps_the_picked_job_first():
    # SJF picks j1 (4 GPUs) at t=1; j2 (shorter) arrives at t=2 while j1 is blocked by j0.
    rows = [(0.0, 100.0, 3), (1.0, 50.0, 4), (2.0, 10.0, 4)]
    pool = homogeneous_pool(4)
    strict = _simulate(_tiny(rows), pool, "sjf", queue_mode="strict")
    committed = _simulate(_tiny(rows), pool, "sjf", queue_mode="committed")
    assert strict.start_s[2] == 100.0 and strict.start_s[1] == 110.0  # re-ranked: j2 first
    assert committed.start_s[1] == 100.0 and committed.start_s[2] == 150.0
    assert_invariants(committed)


def test_easy_backfills_short_jobs_but_never_long_ones_that_delay_the_head():
    pool = homogeneous_pool(4)
    easy = _simulate(_tiny(BLOCKED), pool, queue_mode="easy")
    assert easy.start_s[2] == 2.0 and easy.start_s[1] == 100.0
    long_rows = [*BLOCKED[:2], (2.0, 1000.0, 1)]
    easy_long = _simulate(_tiny(long_rows), pool, queue_mode="easy")
    greedy_long = _simulate(_tiny(long_rows), pool, queue_mode="greedy")
    assert easy_long.start_s[1] == 100.0 and easy_long.start_s[2] == 150.0
    assert greedy_long.start_s[2] == 2.0 and greedy_long.start_s[1] > 100.0


@pytest.mark.parametrize(("profile", "scale"), [("helios", 4.0), ("alibaba", 40.0)])
def test_invariants_and_easy_guarantee_on_heterogeneous_clusters(profile, scale):
    jobs = fill_requested_times(generate(profile, 400, seed=7, arrival_scale=scale), "oracle")
    cluster = with_speed_factors(CLUSTERS.create(profile))
    for mode in ("greedy", "strict", "easy"):
        result = _simulate(jobs, cluster, "fcfs", queue_mode=mode, placer="spread")
        assert_invariants(result)
    # With exact estimates, the first reservation of every FCFS head is honoured.
    easy = _simulate(jobs, cluster, "fcfs", queue_mode="easy")
    assert easy.reservations, "the load is high enough that some head had to wait"
    first_shadow = {}
    for head, _, shadow in easy.reservations:
        first_shadow.setdefault(head, shadow)
    for head, shadow in first_shadow.items():
        assert easy.start_s[head] <= shadow + 1e-6


def test_easy_guarantee_on_lublin_window(shared_traces):
    trace = load_trace(shared_traces / "lublin_256.swf")
    window = fill_requested_times(trace.jobs, "oracle").window(2000, 512)
    result = _simulate(window, trace.cluster, "fcfs", queue_mode="easy")
    assert_invariants(result)
    for head, _, shadow in result.reservations:
        assert result.start_s[head] <= shadow + 1e-6


def test_gpu_type_speed_changes_run_time_and_placement(hetero_cluster):
    only_p100 = [Job("p", 0.0, 100.0, 8, requested_time_s=100.0, gpu_types={"P100"})]
    result = _simulate(JobTable.from_jobs(only_p100), hetero_cluster)
    assert result.gpu_type[0] == "P100" and result.run_s[0] == 200.0  # speed 0.5
    only_v100 = [Job("v", 0.0, 100.0, 4, requested_time_s=100.0, gpu_types={"V100"})]
    assert _simulate(JobTable.from_jobs(only_v100), hetero_cluster).run_s[0] == 100.0


def test_determinism_per_seed():
    raw = generate("helios", 300, seed=3, arrival_scale=3.0)
    cluster = CLUSTERS.create("helios")
    first = _simulate(fill_requested_times(raw, "auto", seed=1), cluster, "sjf", queue_mode="easy")
    again = _simulate(fill_requested_times(raw, "auto", seed=1), cluster, "sjf", queue_mode="easy")
    other = _simulate(fill_requested_times(raw, "noisy", seed=2), cluster, "sjf", queue_mode="easy")
    assert np.array_equal(first.start_s, again.start_s)
    assert list(first.nodes) == list(again.nodes)
    assert not np.array_equal(first.start_s, other.start_s)
    assert np.array_equal(
        generate("helios", 50, seed=9).run_time_s, generate("helios", 50, seed=9).run_time_s
    )


def test_every_policy_runs_on_a_heterogeneous_trace():
    jobs = fill_requested_times(generate("alibaba", 200, seed=1, arrival_scale=5.0), "auto")
    cluster = CLUSTERS.create("alibaba")
    for name in ("fcfs", "sjf", "wfp3", "unicep", "f1", "slurm", "qssf"):
        result = _simulate(jobs, cluster, name, queue_mode="easy")
        assert_invariants(result)
        assert 0 < result.summary()["utilisation_pct"] <= 100


def test_recompute_interval_freezes_priorities():
    rows = [(0.0, 100.0, 4), (1.0, 10.0, 2), (2.0, 500.0, 2), (3.0, 20.0, 1)]
    pool = homogeneous_pool(4)
    frozen = _simulate(_tiny(rows), pool, "wfp3", recompute_interval_s=1e12)
    fcfs = _simulate(_tiny(rows), pool, "fcfs")
    live = _simulate(_tiny(rows), pool, "wfp3")
    # Scored once at arrival (wait 0, all tie) WFP3 degenerates to FCFS; recomputed it does not.
    assert np.array_equal(frozen.start_s, fcfs.start_s)
    assert not np.array_equal(live.start_s, fcfs.start_s)


def test_missing_estimates_and_unrunnable_jobs_are_errors(hetero_cluster):
    no_request = JobTable.from_jobs([Job("a", 0.0, 10.0, 1)])
    with pytest.raises(HetschedError, match="no requested time"):
        Simulator(no_request, hetero_cluster, make_policy("fcfs"))
    too_big = _tiny([(0.0, 10.0, 1), (1.0, 10.0, 64)])
    with pytest.raises(HetschedError, match="can never fit"):
        _simulate(too_big, hetero_cluster)
    dropped = _simulate(too_big, hetero_cluster, drop_unrunnable=True)
    assert dropped.dropped.tolist() == [1] and dropped.summary()["jobs"] == 1


def test_results_are_saved(tmp_path):
    result = _simulate(_tiny(BLOCKED), homogeneous_pool(4), queue_mode="easy")
    result.write_csv(tmp_path / "jobs.csv")
    result.write_json(tmp_path / "summary.json")
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    assert lines[0].startswith("job_id,user,submit_s") and len(lines) == 4
    assert '"bsld"' in (tmp_path / "summary.json").read_text()
    summary = result.summary()
    assert summary["makespan_s"] == 150.0
    # bounded slowdown: j1 waited 99 s and ran 50 s -> (99 + 50) / 50
    assert result.bounded_slowdown[1] == pytest.approx(149 / 50)


# Golden mean bounded slowdowns on two fixed 1024-job windows of lublin_256.swf (oracle runtimes).
GOLDEN = {
    (0, "fcfs", "strict"): 4528.951932466946,
    (0, "fcfs", "easy"): 107.31617070868532,
    (0, "sjf", "strict"): 41.0746608925116,
    (0, "sjf", "easy"): 38.527382192921024,
    (5000, "fcfs", "strict"): 7400.1212426607435,
    (5000, "fcfs", "easy"): 343.8135827486748,
    (5000, "sjf", "strict"): 48.646945190430856,
    (5000, "sjf", "easy"): 28.37879090854649,
    # committed: the job that blocked stays picked (issue 17; was 384.61 and 303.53 before).
    (0, "sjf", "committed"): 362.2660146761302,
    (5000, "sjf", "committed"): 293.5108797294298,
    (0, "sjf", "rlscheduler-backfill"): 57.95741541549526,
    (5000, "sjf", "rlscheduler-backfill"): 58.483120233816294,
}


def test_golden_lublin_windows(shared_traces):
    trace = load_trace(shared_traces / "lublin_256.swf")
    jobs = fill_requested_times(trace.jobs, "oracle")
    for (start, policy, mode), bsld in GOLDEN.items():
        config = SimulationConfig(queue_mode=mode)
        window = jobs.window(start, 1024)
        result = run_policy(window, trace.cluster, make_policy(policy), config)
        assert result.summary()["bsld"] == pytest.approx(bsld, rel=1e-9), (start, policy, mode)


def test_window_evaluation_is_paired_and_seeded():
    jobs = fill_requested_times(generate("helios", 600, seed=2, arrival_scale=3.0), "oracle")
    starts = window_starts(len(jobs), 128, 3, seed=5)
    assert np.array_equal(starts, window_starts(len(jobs), 128, 3, seed=5))
    policies = [make_policy("fcfs"), make_policy("sjf")]
    rows = evaluate_windows(jobs, CLUSTERS.create("helios"), policies, ["easy"], 128, 3, 5)
    assert [(r.policy, r.windows) for r in rows] == [("fcfs", 3), ("sjf", 3)]
    with pytest.raises(ValueError, match="longer than the trace"):
        window_starts(10, 20, 1, 0)
