"""Each priority policy's ordering on hand-made queues."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import DataError, UnknownNameError
from hetsched.jobs.cluster.catalog import homogeneous_pool
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.policies.heuristics import PRIORITY_POLICIES, SlurmMultifactor, make_policy
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.traces.job_table import Job, JobTable


def _state(jobs: list[Job], now_s: float, history: UsageHistory | None = None) -> QueueState:
    table = JobTable.from_jobs(jobs)
    codes, users = table.user_codes()
    cluster = homogeneous_pool(64)
    return QueueState(
        table,
        np.arange(len(table)),
        now_s,
        cluster,
        ClusterState(cluster),
        history or UsageHistory(len(users)),
        codes,
    )


def _order(policy, state) -> list[str]:
    scores = policy.score(state)
    return state.jobs.id[state.queue[np.argsort(scores, kind="stable")]].tolist()


# (id, submit, requested, gpus)
QUEUE = [
    ("a", 0.0, 1000.0, 1),
    ("b", 10.0, 100.0, 8),
    ("c", 20.0, 10000.0, 2),
    ("d", 30.0, 50.0, 1),
]


def _jobs(rows=QUEUE, user=lambda i: "u"):
    return [
        Job(n, s, r, g, requested_time_s=r, user=user(i)) for i, (n, s, r, g) in enumerate(rows)
    ]


def test_fcfs_and_sjf():
    state = _state(_jobs(), 100.0)
    assert _order(make_policy("fcfs"), state) == ["a", "b", "c", "d"]
    assert _order(make_policy("sjf"), state) == ["d", "b", "a", "c"]


def test_wfp3_uses_current_wait_time():
    state = _state(_jobs(), 100.0)
    # -(wt/rt)^3 * n: a (100/1000)^3*1 = 1e-3, b (90/100)^3*8 = 5.83, c ~0, d (70/50)^3 = 2.74
    assert _order(make_policy("wfp3"), state) == ["b", "d", "a", "c"]
    # Jobs that all just arrived have waited 0: they tie and submission order decides.
    fresh = [(n, 0.0, r, g) for n, _, r, g in QUEUE]
    assert _order(make_policy("wfp3"), _state(_jobs(fresh), 0.0)) == ["a", "b", "c", "d"]


def test_unicep_handles_single_gpu_jobs():
    state = _state(_jobs(), 100.0)
    scores = make_policy("unicep").score(state)
    assert np.all(np.isfinite(scores))
    # -wt / (log2(n+1) * rt): d = -70/(1*50) = -1.4, b = -90/(log2(9)*100), a = -0.1
    assert _order(make_policy("unicep"), state) == ["d", "b", "a", "c"]


def test_f1_formula():
    state = _state(_jobs(), 100.0)
    scores = make_policy("f1").score(state)
    expected_b = np.log10(100.0) * 8 + 870 * np.log10(10.0)
    assert scores[1] == pytest.approx(expected_b)
    assert scores[0] == pytest.approx(np.log10(1000.0) * 1 + 870 * np.log10(1.0))  # st floored
    assert _order(make_policy("f1"), state)[0] == "a"


def test_slurm_fair_share_favours_light_users():
    rows = [("heavy", 0.0, 100.0, 1), ("light", 0.0, 100.0, 1)]
    jobs = _jobs(rows, user=lambda i: ["h", "l"][i])
    history = UsageHistory(2)
    history.record_completion(0, 8, 3600.0, end_s=10.0)  # user "h" (code 0) used GPUs
    state = _state(jobs, 10.0, history)
    assert _order(make_policy("slurm"), state) == ["light", "heavy"]


def test_slurm_age_size_partition_and_qos_weights():
    rows = [("old", 0.0, 100.0, 1), ("big", 5000.0, 100.0, 32)]
    state = _state(_jobs(rows), 6000.0)
    age_only = SlurmMultifactor(w_fairshare=0, w_job_size=0, w_partition=0, w_qos=0)
    size_only = SlurmMultifactor(w_age=0, w_fairshare=0, w_partition=0, w_qos=0)
    small_first = SlurmMultifactor(w_age=0, w_fairshare=0, w_partition=0, w_qos=0, favor_small=True)
    assert _order(age_only, state) == ["old", "big"]
    assert _order(size_only, state) == ["big", "old"]
    assert _order(small_first, state) == ["old", "big"]
    tiered = [
        Job("low", 0.0, 1.0, 1, requested_time_s=1.0, virtual_cluster="p1", qos="BE"),
        Job("high", 1.0, 1.0, 1, requested_time_s=1.0, virtual_cluster="p2", qos="LS"),
    ]
    st = _state(tiered, 2.0)
    partition = SlurmMultifactor(w_age=0, w_fairshare=0, w_job_size=0, w_qos=0,
                                 partition_tiers={"p1": 1, "p2": 10})  # fmt: skip
    qos = SlurmMultifactor(w_age=0, w_fairshare=0, w_job_size=0, w_partition=0,
                           qos_levels={"BE": 0, "LS": 100})  # fmt: skip
    assert _order(partition, st) == ["high", "low"]
    assert _order(qos, st) == ["high", "low"]


def test_qssf_uses_history_then_priority_file(tmp_path):
    rows = [("x", 0.0, 10.0, 4), ("y", 1.0, 99999.0, 1)]
    jobs = _jobs(rows, user=lambda i: ["ux", "uy"][i])
    history = UsageHistory(2)
    history.record_completion(0, 4, 10.0, end_s=2.0)  # ux's 4-GPU jobs take 10 s
    history.record_completion(1, 1, 1000.0, end_s=2.0)  # uy's 1-GPU jobs take 1000 s
    state = _state(jobs, 5.0, history)
    # 4 x 10 = 40 GPU-s vs 1 x 1000: x first despite its size and y's... request.
    assert _order(make_policy("qssf"), state) == ["x", "y"]
    file = tmp_path / "prio.csv"
    file.write_text("job_id,duration_s\nx,5000\n")
    assert _order(make_policy("qssf", priority_file=str(file)), state) == ["y", "x"]
    file.write_text("x,soon\n")
    with pytest.raises(DataError, match="duration_s"):
        make_policy("qssf", priority_file=str(file))


def test_registry_lists_every_policy_and_rejects_unknown():
    assert set(PRIORITY_POLICIES.names()) >= {
        "fcfs",
        "sjf",
        "wfp3",
        "unicep",
        "f1",
        "slurm",
        "qssf",
    }
    with pytest.raises(UnknownNameError, match="fcfs"):
        make_policy("lottery")
