"""The live loop against a fake Slurm that answers with captured 22.05 output."""

from __future__ import annotations

import copy
import subprocess

import pytest
import torch

from hetsched.jobs.placement.placers import PackPlacer, SpreadPlacer
from hetsched.jobs.policies.heuristics import SJF, make_policy
from hetsched.jobs.rl.agent import JobScoringAgent, save_checkpoint
from hetsched.jobs.rl.policy import policy_by_name
from hetsched.jobs.slurm.adapter import AdapterConfig, SlurmAdapter
from hetsched.jobs.slurm.client import SlurmClient
from hetsched.jobs.slurm.controller import SlurmUnreachableError
from hetsched.jobs.slurm.priorities import SLURM_MAX_PRIORITY, PriorityRange
from hetsched.jobs.slurm.priority_band import BASIC_TOP_PRIORITY

from .conftest import FIXTURES

# Pending, not held, in the fixture: requested 25 (job 1), 12.5 (2), 3 (4), 8 (5), 300 (6), 60 (8).
SJF_ORDER = [4, 5, 2, 1, 8, 6]
RANGE = PriorityRange(top=10_000, step=100)


def make_adapter(fake, policy=None, sleeps=None, **options) -> SlurmAdapter:
    options.setdefault("trust_requested_comment", True)
    config = AdapterConfig(interval_s=0.0, priority_range=RANGE, retry_delay_s=0.25, **options)
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    client = SlurmClient(runner=fake)
    return SlurmAdapter(client, policy or SJF(), config, clock=lambda: 1_795_400_000.0, sleep=sleep)


def test_priorities_follow_the_policy(fake_slurm):
    report = make_adapter(fake_slurm).scan()
    expected = {job: RANGE.top - rank * RANGE.step for rank, job in enumerate(SJF_ORDER)}
    assert {j: fake_slurm.job(j)["priority"] for j in SJF_ORDER} == expected
    assert fake_slurm.job(7)["priority"] == 0  # held: left alone
    assert fake_slurm.job(3)["priority"] == 2000  # running: left alone
    assert report.pending == 6 and report.running == 1 and not report.failures
    assert {c.job_id for c in report.changes} == set(SJF_ORDER)


def test_untrusted_comments_leave_the_time_limits(fake_slurm):
    """Off by default: SJF ranks by time limit (1 min for all but job 6's 5 min), ties share."""
    make_adapter(fake_slurm, trust_requested_comment=False).scan()
    priorities = {j: fake_slurm.job(j)["priority"] for j in SJF_ORDER}
    assert priorities[6] == RANGE.top - RANGE.step
    assert {priorities[j] for j in SJF_ORDER if j != 6} == {RANGE.top}


HOSTILE_COMMENTS = ["-", "-5", "nan", "inf", "1e308", "\u0663", "0", "9" * 10_000, "x" * 10_240]


def test_hostile_records_are_skipped_and_counted_once(fake_slurm, caplog):
    """Hostile comments, a malformed record and a non-record: every sane job is still ranked,
    each problem is warned about once (not at every scan) and counted."""
    template = fake_slurm.job(2)
    for offset, value in enumerate(HOSTILE_COMMENTS):
        fake_slurm.squeue["jobs"].append(
            dict(template, job_id=100 + offset, comment="hetsched:requested_s=" + value)
        )
    fake_slurm.squeue["jobs"] += [dict(template, job_id=200, priority="high"), ["junk"]]
    adapter = make_adapter(fake_slurm)
    with caplog.at_level("WARNING", logger="hetsched.jobs.slurm"):
        report = adapter.scan()
        adapter.scan()
    assert report.error is None and not report.failures
    assert (report.skipped_records, report.ignored_comments) == (2, len(HOSTILE_COMMENTS))
    assert (len(adapter.tally.skipped_records), len(adapter.tally.ignored_comments)) == (2, 9)
    assert len(caplog.records) == 11  # once each, the second scan adds nothing
    assert all(len(r.getMessage()) < 400 and r.getMessage().isascii() for r in caplog.records)
    assert adapter.tally.summary() == (
        "2 malformed records skipped, 9 requested-time comments ignored"
    )
    expected = {job: RANGE.top - rank * RANGE.step for rank, job in enumerate(SJF_ORDER[:3])}
    assert {j: fake_slurm.job(j)["priority"] for j in SJF_ORDER[:3]} == expected
    # A hostile job is ranked by its 1-minute limit: after job 1 (25 s), beside job 8 (60 s).
    assert fake_slurm.job(100)["priority"] == fake_slurm.job(8)["priority"]
    assert fake_slurm.job(200)["priority"] == "high"  # skipped, never touched


def test_second_scan_only_touches_what_moved(fake_slurm):
    adapter = make_adapter(fake_slurm)
    adapter.scan()
    calls = len(fake_slurm.updates())
    assert adapter.scan().changes == []
    assert len(fake_slurm.updates()) == calls


def test_dry_run_changes_nothing(fake_slurm):
    before = copy.deepcopy(fake_slurm.squeue)
    report = make_adapter(fake_slurm, dry_run=True).scan()
    assert fake_slurm.updates() == [] and fake_slurm.squeue == before
    assert {c.outcome for c in report.changes} == {"dry-run"} and len(report.changes) == 6


@pytest.mark.parametrize(("option", "value"), [("user", "alice"), ("partition", "gpu")])
def test_filter_leaves_other_jobs_alone(fake_slurm, option, value):
    report = make_adapter(fake_slurm, **{option: value}).scan()
    assert fake_slurm.updates() == [] and report.pending == 0


def test_matching_filter_touches_jobs(fake_slurm):
    make_adapter(fake_slurm, user="root", partition="debug").scan()
    assert len(fake_slurm.updates()) == 6


def test_vanished_job_does_not_stop_the_scan(fake_slurm):
    fake_slurm.fail[4] = ["Job has already finished for job 4"]
    report = make_adapter(fake_slurm).scan()
    outcomes = {c.job_id: c.outcome for c in report.changes}
    assert outcomes[4] == "vanished"
    assert [outcomes[j] for j in SJF_ORDER[1:]] == ["applied"] * 5
    assert fake_slurm.job(5)["priority"] == RANGE.top - RANGE.step


def test_failed_call_is_retried_then_reported_then_tried_again(fake_slurm):
    sleeps = []
    fake_slurm.fail[2] = ["Unable to contact slurm controller (connect failure)"]
    adapter = make_adapter(fake_slurm, sleeps=sleeps, retries=2)
    report = adapter.scan()
    assert not report.failures and sleeps == [0.25]  # one failure, one retry, applied
    fake_slurm.fail[1] = ["Unable to contact slurm controller"] * 3
    fake_slurm.job(1)["priority"] = 1  # something else moved it: the adapter must fix it
    report = adapter.scan()
    (failed,) = report.failures
    assert failed.job_id == 1 and "Unable to contact" in failed.outcome
    assert adapter.scan().changes[0].outcome == "applied"  # next scan: Slurm answers again
    assert fake_slurm.job(1)["priority"] == RANGE.top - 3 * RANGE.step


def test_scan_error_is_reported_and_the_loop_goes_on(fake_slurm):
    calls = {"n": 0}

    def flaky(argv, timeout_s, env):
        calls["n"] += argv[0] == "squeue"
        if calls["n"] == 1 and argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: timeout")
        return fake_slurm(argv, timeout_s, env)

    reports = []
    adapter = make_adapter(flaky)
    assert adapter.run(max_scans=2, on_scan=reports.append) == 2
    assert "slurm_load_jobs error" in reports[0].error
    assert reports[1].error is None and len(reports[1].changes) == 6


def test_restore_hands_priorities_back(fake_slurm):
    original = {j: fake_slurm.job(j)["priority"] for j in SJF_ORDER}
    adapter = make_adapter(fake_slurm)
    adapter.scan()
    fake_slurm.remove(8)  # finished meanwhile: nothing to restore
    changes = adapter.restore()
    assert {c.job_id for c in changes} == set(SJF_ORDER) - {8}
    assert {j: fake_slurm.job(j)["priority"] for j in SJF_ORDER if j != 8} == {
        j: p for j, p in original.items() if j != 8
    }
    assert ["scontrol", "release", "8"] not in fake_slurm.updates()


def test_run_restores_on_the_way_out(fake_slurm):
    original = fake_slurm.job(1)["priority"]
    make_adapter(fake_slurm).run(max_scans=1, restore=True)
    assert fake_slurm.job(1)["priority"] == original


def test_completions_feed_the_history(fake_slurm):
    adapter = make_adapter(fake_slurm, policy=make_policy("qssf"))
    adapter.scan()
    record = fake_slurm.job(3)
    record["job_state"] = "COMPLETED"
    record["end_time"] = record["start_time"] + 30
    report = adapter.scan()
    assert report.finished == [3] and report.running == 0
    (completion,) = adapter._completions
    assert (completion.num_gpus, completion.run_time_s) == (4, 30.0)


def test_until_idle_stops(fake_slurm):
    fake_slurm.squeue["jobs"] = []
    assert make_adapter(fake_slurm).run(until_idle=True) == 1


def two_node_sinfo(fake_slurm) -> dict:
    node = fake_slurm.sinfo["nodes"][0]
    busy = dict(node, name="n0", gres_used="gpu:2(IDX:0-1)", alloc_cpus=2)
    idle = dict(node, name="n1", gres_used="gpu:0", alloc_cpus=0, state="idle")
    return {**fake_slurm.sinfo, "nodes": [busy, idle]}


def test_spread_advice_isolates_a_job_at_yes(fake_slurm):
    fake_slurm.sinfo = two_node_sinfo(fake_slurm)
    fake_slurm.job(4)["shared"] = "shared"  # submitted with --oversubscribe
    report = make_adapter(fake_slurm, placer=SpreadPlacer(), advice_top_k=1).scan()
    assert ["scontrol", "update", "jobid=4", "oversubscribe=no"] in fake_slurm.updates()
    assert fake_slurm.job(4)["shared"] == "none"
    (change,) = [c for c in report.changes if c.what == "oversubscribe"]
    assert (change.old, change.new, change.outcome) == ("YES", "NO", "applied")


@pytest.mark.parametrize("original", [None, "user", "mcs", "none"])
def test_values_scontrol_cannot_write_back_are_never_touched(fake_slurm, caplog, original):
    """scontrol writes only yes/no: OK, USER and MCS could never be restored, NO is the user's."""
    fake_slurm.sinfo = two_node_sinfo(fake_slurm)
    fake_slurm.job(4)["shared"] = original
    adapter = make_adapter(fake_slurm, placer=SpreadPlacer(), advice_top_k=1)
    with caplog.at_level("INFO", logger="hetsched.jobs.slurm"):
        adapter.scan()
        adapter.scan()
    assert not [c for c in fake_slurm.updates() if "oversubscribe" in c[-1]]
    assert fake_slurm.job(4)["shared"] == original
    noted = [r for r in caplog.records if "cannot be written back" in r.getMessage()]
    assert len(noted) == (0 if original == "none" else 1)


def test_pack_advice_leaves_sharing_alone(fake_slurm):
    fake_slurm.sinfo = two_node_sinfo(fake_slurm)
    fake_slurm.job(4)["shared"] = "shared"
    make_adapter(fake_slurm, placer=PackPlacer()).scan()
    assert not [c for c in fake_slurm.updates() if "oversubscribe" in c[-1]]


def test_restore_writes_back_the_original_value_exactly(fake_slurm):
    fake_slurm.sinfo = two_node_sinfo(fake_slurm)
    fake_slurm.job(4)["shared"] = "shared"
    before = {j: fake_slurm.job(j)["shared"] for j in SJF_ORDER}
    adapter = make_adapter(fake_slurm, placer=SpreadPlacer(), advice_top_k=1)
    adapter.scan()
    assert fake_slurm.job(4)["shared"] == "none"
    changes = adapter.restore()
    assert ("restore-oversubscribe", "NO", "YES") in [(c.what, c.old, c.new) for c in changes]
    assert {j: fake_slurm.job(j)["shared"] for j in SJF_ORDER} == before
    assert fake_slurm.job(6)["shared"] == "none"  # the user's own --exclusive stays


def test_pack_advice_later_lifts_only_what_the_adapter_set(fake_slurm):
    fake_slurm.sinfo = two_node_sinfo(fake_slurm)
    fake_slurm.job(4)["shared"] = "shared"
    adapter = make_adapter(fake_slurm, placer=SpreadPlacer(), advice_top_k=8)
    adapter.scan()
    adapter.config.placer = PackPlacer()
    adapter.scan()
    assert fake_slurm.job(4)["shared"] == "shared"
    assert fake_slurm.job(5)["shared"] == "none" and fake_slurm.job(6)["shared"] == "none"
    lifted = [c for c in fake_slurm.updates() if c[-1] == "oversubscribe=yes"]
    assert lifted == [["scontrol", "update", "jobid=4", "oversubscribe=yes"]]


def test_a_checkpoint_resolves_through_policy_by_name(fake_slurm, tmp_path):
    """``--policy model.pt`` loads the RL prioritiser (issue 6) through ``policy_by_name``."""
    torch.manual_seed(0)
    checkpoint = tmp_path / "agent.pt"
    save_checkpoint(checkpoint, JobScoringAgent(max_queue=16), {"base_policy": "fcfs"})
    policy = policy_by_name(str(checkpoint))
    assert policy.name == "RL-fcfs"
    report = make_adapter(fake_slurm, policy=policy).scan()
    assert report.error is None and not report.failures
    priorities = sorted(fake_slurm.job(j)["priority"] for j in SJF_ORDER)
    assert priorities[-1] == RANGE.top and all(p % RANGE.step == 0 for p in priorities)


def basic_fake(fake_slurm):
    fake_slurm.config = (FIXTURES / "scontrol_show_config_basic_22.05.txt").read_text()
    return fake_slurm


def test_automatic_band_under_priority_basic(fake_slurm):
    """Another user's pending job at basic's top value stays below the managed jobs."""
    fake = basic_fake(fake_slurm)
    fake.squeue["jobs"].append(
        dict(fake.job(2), job_id=50, user_name="bob", priority=BASIC_TOP_PRIORITY)
    )
    adapter = SlurmAdapter(
        SlurmClient(runner=fake), SJF(), AdapterConfig(user="root", trust_requested_comment=True)
    )
    adapter.scan()
    managed = [fake.job(j)["priority"] for j in SJF_ORDER]
    assert min(managed) > BASIC_TOP_PRIORITY and max(managed) <= SLURM_MAX_PRIORITY
    assert managed == sorted(managed, reverse=True)  # SJF order, best first
    assert fake.job(50)["priority"] == BASIC_TOP_PRIORITY  # not managed: untouched


def test_automatic_band_under_multifactor(fake_slurm):
    adapter = SlurmAdapter(
        SlurmClient(runner=fake_slurm), SJF(), AdapterConfig(trust_requested_comment=True)
    )
    adapter.scan()
    assert [fake_slurm.job(j)["priority"] for j in SJF_ORDER] == [
        5001 + 100 * 9999 - 100 * rank for rank in range(6)
    ]


def test_restore_under_basic_writes_the_original_back(fake_slurm):
    """A release under basic would hand the job a new, lowest value (the back of the queue)."""
    fake = basic_fake(fake_slurm)
    original = {j: fake.job(j)["priority"] for j in SJF_ORDER}
    adapter = make_adapter(fake)
    adapter.scan()
    adapter.restore()
    assert not [c for c in fake.updates() if c[1] == "release"]
    assert {j: fake.job(j)["priority"] for j in SJF_ORDER} == original


def test_controller_down_at_start_is_a_clear_error(fake_slurm):
    fake_slurm.down = True
    adapter = make_adapter(fake_slurm, connect_timeout_s=0.0)
    with pytest.raises(SlurmUnreachableError, match="slurmctld unreachable for 0 s"):
        adapter.run(until_idle=True)


@pytest.mark.parametrize("until_idle", [False, True])
def test_a_long_outage_ends_the_loop(fake_slurm, until_idle):
    times = iter(range(0, 10_000, 10))
    config = AdapterConfig(interval_s=0.0, max_outage_s=60.0, priority_range=RANGE)
    adapter = SlurmAdapter(
        SlurmClient(runner=fake_slurm), SJF(), config, clock=lambda: float(next(times))
    )

    def go_down(report):
        fake_slurm.down = True

    with pytest.raises(
        SlurmUnreachableError,
        match=r"no successful scan for 60 s \(last error: .*Unable to contact",
    ):
        adapter.run(until_idle=until_idle, on_scan=go_down)
