"""The adapter against a real Slurm 22.05 on localhost with fake GPUs (skips without Slurm/root).

Every job asks all 4 GPUs or waits behind one that does, so the start order is exactly the order
Slurm's priorities impose, and the tests can check it against the policy.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.policies.heuristics import SJF
from hetsched.jobs.slurm.adapter import AdapterConfig, SlurmAdapter
from hetsched.jobs.slurm.client import SlurmClient, SubmitRequest
from hetsched.jobs.slurm.experiment import FINAL_STATES, wait_until_done
from hetsched.jobs.slurm.priority_band import BASIC_TOP_PRIORITY

pytestmark = [pytest.mark.integration, pytest.mark.needs_slurm]


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


def states(client: SlurmClient, ids) -> dict:
    jobs = {j.job_id: j for j in client.jobs()}
    return {i: jobs[i] for i in ids}


@pytest.fixture
def client(local_slurm):
    """A client of the module's Slurm; cancels whatever a test leaves behind."""
    client = local_slurm.client()
    yield client
    live = [j.job_id for j in client.jobs() if j.state not in FINAL_STATES]
    client.cancel(live)
    wait_for(lambda: all(j.state in FINAL_STATES for j in client.jobs()), 20, "an empty queue")


def test_priorities_follow_the_policy_and_set_the_start_order(client):
    blocker = client.submit(SubmitRequest("blocker", 3.0, 4, 60, requested_time_s=1.0))
    ids = [
        client.submit(SubmitRequest(f"j{i}", 1.5, 4, 60, requested_time_s=r))
        for i, r in enumerate((30.0, 20.0, 10.0))
    ]
    assert len({j.priority for j in states(client, ids).values()}) == 1  # Slurm alone: FCFS
    config = AdapterConfig(interval_s=0.5, trust_requested_comment=True)
    adapter = SlurmAdapter(client, SJF(), config)
    report = adapter.scan()
    assert not report.failures and report.error is None
    jobs = states(client, [blocker, *ids])
    band = adapter.priority_range
    top, step = band.top, band.step
    assert band.bottom > 5000  # above all multifactor can give (five weights of 1000)
    pending = [i for i in ids if jobs[i].pending]
    assert pending == ids  # nothing passed the running (or top-ranked) blocker
    # SJF: the job asking 10 s first, then 20 s, then 30 s; the blocker (1 s) is ranked above
    # them if it was still pending at the scan.
    offset = 1 if jobs[blocker].pending else 0
    assert [jobs[i].priority for i in ids] == [top - (offset + r) * step for r in (2, 1, 0)]
    wait_for(
        lambda: all(j.state == "COMPLETED" for j in states(client, ids).values()),
        40,
        "the three jobs to complete",
    )
    starts = [j.start_time_s for j in states(client, ids).values()]
    assert starts[2] < starts[1] < starts[0], starts


def test_priority_basic_managed_jobs_go_above_fifo_and_restore_exactly(basic_slurm):
    """Under priority/basic new jobs get ~4.29e9: the adapter must place its jobs above that, and
    a restore must write the original numbers back (a release would requeue them last)."""
    client = basic_slurm.client()
    blocker = client.submit(SubmitRequest("blocker", 2.0, 4, 60))
    ids = [
        client.submit(SubmitRequest(f"b{i}", 1.0, 4, 60, requested_time_s=r))
        for i, r in enumerate((30.0, 20.0, 10.0))
    ]
    original = {i: j.priority for i, j in states(client, ids).items()}
    assert min(original.values()) > 4_200_000_000  # basic's own values, falling by one per job
    config = AdapterConfig(interval_s=0.3, trust_requested_comment=True)
    adapter = SlurmAdapter(client, SJF(), config)
    adapter.scan()
    assert adapter.priority_range.bottom == BASIC_TOP_PRIORITY + 1
    managed = [states(client, ids)[i].priority for i in ids]
    assert managed[2] > managed[1] > managed[0] > BASIC_TOP_PRIORITY
    adapter.restore()
    assert {i: j.priority for i, j in states(client, ids).items()} == original
    late = client.submit(SubmitRequest("late", 1.0, 4, 60, requested_time_s=5.0))
    assert states(client, [late])[late].priority < min(original.values())  # FIFO: last
    assert adapter.run(max_scans=200, until_idle=True) < 200
    jobs = states(client, [blocker, late, *ids])
    assert {j.state for j in jobs.values()} == {"COMPLETED"}
    starts = [jobs[i].start_time_s for i in (late, ids[2], ids[1], ids[0])]
    assert starts == sorted(set(starts)), starts  # SJF again: the late 5 s job first


def test_milp_advice_acts_on_several_nodes_and_restores_exactly(multi_slurm):
    """A 1-GPU job runs on n1 (4 GPUs). Slurm alone would put a 2-GPU job next to it; the MILP
    placer isolates it on an idle 2-GPU node, so the adapter sets OverSubscribe=NO and the job
    starts there alone. A job at YES gets YES back on restore; one at OK is never touched."""
    client = multi_slurm.client()
    assert [(n.name, n.num_gpus) for n in client.nodes()] == [
        ("n1", 4),
        ("n2", 2),
        ("n3", 2),
        ("n4", 1),
    ]
    blocker = client.submit(SubmitRequest("blocker", 30.0, 1, 60))
    wait_for(lambda: states(client, [blocker])[blocker].running, 15, "the blocker to start")

    def later(name: str, begin_s: int, oversubscribe: bool) -> int:
        argv = ["sbatch", "--parsable", "--output=/dev/null", f"--job-name={name}"]
        argv += ["--gres=gpu:2", "--cpus-per-task=2", "--time=1", f"--begin=now+{begin_s}"]
        argv += ["--oversubscribe"] * oversubscribe + ["--wrap=sleep 1"]
        return int(client.run(argv).strip())

    soon, waiting, default = (
        later("soon", 3, True),
        later("yes", 300, True),
        later("ok", 300, False),
    )
    config = AdapterConfig(interval_s=0.5, placer=PLACERS.create("milp"), advice_top_k=8)
    adapter = SlurmAdapter(client, SJF(), config)
    report = adapter.scan()
    isolated = {c.job_id for c in report.changes if c.what == "oversubscribe"}
    assert isolated == {soon, waiting} and not report.failures
    jobs = states(client, [soon, waiting, default])
    assert (jobs[soon].shared, jobs[waiting].shared, jobs[default].shared) == ("none", "none", None)
    wait_for(lambda: not states(client, [soon])[soon].pending, 20, "the isolated job to start")
    placed = {j.job_id: j for j in client.jobs()}
    node_of = {
        i: client.run(["squeue", "-h", "-j", str(i), "-o", "%N"]).strip() for i in (blocker, soon)
    }
    assert node_of[blocker] == "n1" and node_of[soon] in ("n2", "n3"), node_of
    restored = adapter.restore()
    assert [(c.job_id, c.what, c.new) for c in restored if "oversubscribe" in c.what] == [
        (waiting, "restore-oversubscribe", "YES")
    ]
    jobs = states(client, [waiting, default])
    assert (jobs[waiting].shared, jobs[default].shared) == ("shared", None)
    assert placed[soon].shared == "none"
    client.cancel([blocker, waiting, default])


class CancelOneWhileScoring:
    """SJF that cancels one job while scoring: it vanishes between scan and update."""

    name = "sjf-cancelling"

    def __init__(self, client: SlurmClient, victim: int) -> None:
        self.client, self.victim = client, victim

    def score(self, state):
        self.client.cancel([self.victim])
        return SJF().score(state)


def test_dry_run_restore_and_a_vanishing_job(client):
    blocker = client.submit(SubmitRequest("blocker", 60.0, 4, 120))
    ids = [
        client.submit(SubmitRequest(f"w{i}", 1.0, 1, 60, requested_time_s=r))
        for i, r in enumerate((30.0, 20.0, 10.0))
    ]
    wait_for(lambda: states(client, [blocker])[blocker].running, 15, "the blocker to start")
    original = {i: j.priority for i, j in states(client, ids).items()}

    trusting = AdapterConfig(trust_requested_comment=True)
    dry = SlurmAdapter(client, SJF(), replace(trusting, dry_run=True)).scan()
    assert {c.outcome for c in dry.changes} == {"dry-run"} and len(dry.changes) == 3
    assert {i: j.priority for i, j in states(client, ids).items()} == original

    adapter = SlurmAdapter(client, CancelOneWhileScoring(client, ids[1]), trusting)
    report = adapter.scan()
    outcomes = {c.job_id: c.outcome for c in report.changes}
    assert outcomes == {ids[0]: "applied", ids[1]: "vanished", ids[2]: "applied"}
    changed = states(client, [ids[0], ids[2]])
    assert changed[ids[2]].priority > changed[ids[0]].priority > original[ids[0]]

    restored = adapter.restore()
    assert {c.job_id for c in restored} == {ids[0], ids[2]}
    after = states(client, [ids[0], ids[2]])
    assert {i: j.priority for i, j in after.items()} == {i: original[i] for i in after}


HOSTILE_COMMENTS = [
    "-",
    "-5",
    "nan",
    "inf",
    "1e308",
    "\u0663\u0664",
    "0",
    "9" * 400,
    "1" + "0" * 1000,  # sbatch refuses comments over 1024 characters (the 10 kB case is a unit
]  # test on a recorded squeue)


def test_hostile_comments_do_not_stop_the_loop(client):
    """Any user can write any comment: each bad claim is ignored and counted, and the loop keeps
    ranking and running every other job."""
    blocker = client.submit(SubmitRequest("blocker", 2.0, 4, 60))
    hostile = []
    for value in HOSTILE_COMMENTS:
        argv = ["sbatch", "--parsable", "--output=/dev/null", "--gres=gpu:1", "--time=1"]
        argv += [f"--comment=hetsched:requested_s={value}", "--wrap=sleep 0.2"]
        hostile.append(int(client.run(argv).strip()))
    ids = [
        client.submit(SubmitRequest(f"j{i}", 0.5, 4, 60, requested_time_s=r))
        for i, r in enumerate((30.0, 20.0, 10.0))
    ]
    config = AdapterConfig(interval_s=0.3, trust_requested_comment=True)
    adapter = SlurmAdapter(client, SJF(), config)
    report = adapter.scan()
    assert report.error is None and not report.failures
    assert adapter.tally.ignored_comments >= {j for j in hostile if states(client, [j])[j].pending}
    jobs = states(client, ids)
    if all(j.pending for j in jobs.values()):
        assert jobs[ids[2]].priority > jobs[ids[1]].priority > jobs[ids[0]].priority
    assert adapter.run(max_scans=200, until_idle=True) < 200
    assert {j.state for j in states(client, [blocker, *hostile, *ids]).values()} == {"COMPLETED"}
    assert len(adapter.tally.ignored_comments) == len(HOSTILE_COMMENTS)


runner = CliRunner()


def test_cli_submit_then_drive_until_idle(client, local_slurm, tmp_path):
    conf = str(local_slurm.conf)
    result = runner.invoke(
        typer_app,
        [
            "jobs",
            "slurm-submit",
            "--slurm-conf",
            conf,
            "--jobs",
            "3",
            "--seed",
            "4",
            "--arrival-span-s",
            "0",
            "--max-run-s",
            "1.5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "submitted 3 jobs" in result.output
    result = runner.invoke(
        typer_app,
        [
            "jobs",
            "slurm",
            "--slurm-conf",
            conf,
            "--policy",
            "sjf",
            "--trust-requested-comment",
            "--interval",
            "0.3",
            "--until-idle",
            "--restore",
            "--max-scans",
            "100",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "scans" in result.output
    assert all(j.state == "COMPLETED" for j in client.jobs() if j.name.startswith("hs-"))


def test_cli_experiment_three_arms_three_times(tmp_path):
    """The harness end to end on a tiny workload: three arms, three live runs each (interleaved),
    spreads and verdicts in results.json."""
    out = tmp_path / "exp"
    result = runner.invoke(
        typer_app,
        [
            "jobs",
            "slurm-experiment",
            "--jobs",
            "3",
            "--seed",
            "1",
            "--max-run-s",
            "1",
            "--arrival-span-s",
            "0",
            "--interval",
            "0.5",
            "--repeats",
            "3",
            "--timeout-s",
            "60",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    rows = payload["results"]
    live = [(r["arm"], r["repeat"]) for r in rows if r["mode"] == "live"]
    assert live == [(arm, k) for k in range(3) for arm in ("fifo", "multifactor", "hetsched")]
    for row in rows:
        assert row["makespan_s"] > 0 and 0 < row["gpu_utilisation_pct"] <= 100
        assert sorted(row["start_order"]) == list(range(3))
        if row["mode"] == "live":
            assert row["final_states"] == {"COMPLETED": 3} and row["adapter_error"] is None
    assert [(s["arm"], s["mode"], s["makespan_s"]["runs"]) for s in payload["summary"]][3:] == [
        ("fifo", "live", 3),
        ("multifactor", "live", 3),
        ("hetsched", "live", 3),
    ]


def test_the_harness_rides_out_a_controller_restart(local_slurm, client):
    """slurmctld restarted while the harness waits: it retries, the jobs survive in the state
    folder, and every one is reported finished."""
    ids = [client.submit(SubmitRequest(f"r{i}", 2.0, 1, 60)) for i in range(3)]
    waiting = threading.Thread(
        target=lambda: found.update(wait_until_done(client, ids, 60.0, poll_s=0.2))
    )
    found: dict = {}
    waiting.start()
    time.sleep(0.5)
    local_slurm.restart_controller()
    waiting.join(timeout=70)
    assert {j.state for j in found.values()} == {"COMPLETED"} and sorted(found) == ids
