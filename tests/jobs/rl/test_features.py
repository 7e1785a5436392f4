"""RLTune's Table 3 features and eqs. 1-3 on hand-made clusters; the 8-feature sampling."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.jobs.cluster.model import Allocation
from hetsched.jobs.cluster.state import ClusterState, fragmentation_factor
from hetsched.jobs.placement.placers import JobRequest, PackPlacer
from hetsched.jobs.policies.history import UsageHistory
from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.features import CFF_HIGH, CRITIC_FEATURES, OBS_FEATURES, build_features
from hetsched.jobs.traces.job_table import Job, JobTable


def _take(state: ClusterState, node: int, gpus: int) -> None:
    state.allocate(Allocation(np.array([node]), np.array([gpus]), np.zeros(1), np.zeros(1), ""))


def _jobs() -> JobTable:
    """A: 2 GPUs anywhere; B: 8 V100 (too many now); C: 8 P100 (fits p1); D: 12 P100 (spans
    p0 + p1); E: 1 GPU with 40 CPUs (no node has that many)."""
    return JobTable.from_jobs(
        [
            Job("A", 0.0, 100.0, 2, requested_time_s=200.0, cpus=4.0, memory_mib=8192.0),
            Job("B", 10.0, 100.0, 8, requested_time_s=3600.0, gpu_types=frozenset({"V100"})),
            Job("C", 20.0, 100.0, 8, requested_time_s=600.0, gpu_types=frozenset({"P100"})),
            Job("D", 30.0, 100.0, 12, requested_time_s=600.0, gpu_types=frozenset({"P100"})),
            Job("E", 40.0, 100.0, 1, requested_time_s=60.0, cpus=40.0),
        ]
    )


def _state(cluster, jobs: JobTable, cluster_state: ClusterState, now_s: float = 100.0):
    codes, names = jobs.user_codes()
    return QueueState(
        jobs,
        np.arange(len(jobs)),
        now_s,
        cluster,
        cluster_state,
        UsageHistory(len(names)),
        codes,
    )


@pytest.fixture
def busy(hetero_cluster):
    """v0 (4 GPUs) full, p0 (8 GPUs) half used: free GPUs per node = [0, 4, 4, 8]."""
    state = ClusterState(hetero_cluster)
    _take(state, 0, 4)
    _take(state, 2, 4)
    return state


def test_fragmentation_factor_eq3_herfindahl_form():
    assert fragmentation_factor(np.array([8.0])) == 0.0
    assert fragmentation_factor(np.array([8.0, 0.0])) == 0.0  # all free GPUs on one node
    assert fragmentation_factor(np.array([4.0, 4.0])) == pytest.approx(1.0)  # evenly spread
    assert fragmentation_factor(np.array([6.0, 2.0])) == pytest.approx((1 - 40 / 64) / 0.5)
    assert fragmentation_factor(np.zeros(3)) == 0.0


def test_cluster_features_on_a_hand_made_cluster(hetero_cluster, busy):
    features = build_features(_state(hetero_cluster, _jobs(), busy), max_queue=8)
    t = features.table
    assert features.can_start[:5].tolist() == [True, False, True, True, False]
    # num_ways: A fits whole on v1, p0 and p1; C only on p1; D spans P100 nodes (one type).
    ways = np.expm1(t["num_ways_to_schedule"] * np.log1p(len(hetero_cluster.nodes)))
    assert np.round(ways).tolist() == [3, 0, 1, 1, 0]
    # free_nodes: fully free eligible nodes / eligible nodes.
    assert t["free_nodes"].tolist() == pytest.approx([2 / 4, 1 / 2, 1 / 2, 1 / 2, 2 / 4])


def test_demand_supply_and_future_availability_eqs_1_2(hetero_cluster, busy):
    t = build_features(_state(hetero_cluster, _jobs(), busy), max_queue=8).table
    # Eq. 1: req / free of the eligible types, squashed to req / (req + free).
    free = np.array([16.0, 4.0, 12.0, 12.0, 16.0])
    req = np.array([2.0, 8.0, 8.0, 12.0, 1.0])
    assert t["demand_supply_ratio"] == pytest.approx(req / (req + free))
    # Eq. 2: (capacity - allocated - request) / capacity, mapped from [-1, 1] to [0, 1].
    capacity = np.array([24.0, 8.0, 16.0, 16.0, 24.0])
    assert t["future_availability"] == pytest.approx(((free - req) / capacity + 1) / 2)
    # Eq. 3 per eligible pool: all nodes [0, 4, 4, 8]; V100 [0, 4]; P100 [4, 8].
    cff_all = (1 - 96 / 256) / (1 - 1 / 4)
    cff_p100 = (1 - 80 / 144) / 0.5
    expected = [cff_all, 0.0, cff_p100, cff_p100, cff_all]
    assert t["fragmentation_factor"] == pytest.approx(expected)


def test_can_schedule_now_agrees_with_the_placer(hetero_cluster, busy):
    jobs = _jobs()
    features = build_features(_state(hetero_cluster, jobs, busy), max_queue=8)
    for i in range(len(jobs)):
        request = JobRequest(
            int(jobs.num_gpus[i]),
            float(jobs.cpus[i]),
            float(jobs.memory_mib[i]),
            hetero_cluster.type_mask(jobs.gpu_types[i]),
        )
        assert features.can_start[i] == (PackPlacer().place(request, busy) is not None)


def test_size_urgency_and_sampling_follow_fragmentation(hetero_cluster, busy):
    jobs = _jobs()
    fragmented = build_features(_state(hetero_cluster, jobs, busy), max_queue=8)
    assert fragmented.cluster_fragmentation >= CFF_HIGH
    assert fragmented.sampled[6] == "job_size"
    assert fragmented.observation[:5, 6] == pytest.approx(fragmented.table["job_size"])
    consolidated = ClusterState(hetero_cluster)  # free GPUs only on p1: [0, 0, 0, 8]
    for node, gpus in ((0, 4), (1, 4), (2, 8)):
        _take(consolidated, node, gpus)
    calm = build_features(_state(hetero_cluster, jobs, consolidated), max_queue=8)
    assert calm.cluster_fragmentation == 0.0
    assert calm.sampled[6] == "job_urgency"
    wait = 100.0 - jobs.submit_time_s
    mean_requested = jobs.requested_time_s.mean()
    assert calm.table["job_urgency"] == pytest.approx(wait / (wait + mean_requested))
    assert calm.observation[:5, 6] == pytest.approx(calm.table["job_urgency"])
    # Slot 7: num_ways for a job with several ways (A), free_nodes otherwise.
    obs = fragmented.observation
    assert obs[0, 7] == pytest.approx(fragmented.table["num_ways_to_schedule"][0])
    assert obs[2, 7] == pytest.approx(fragmented.table["free_nodes"][2])
    # Job size grows with GPUs x requested time.
    assert np.argmax(fragmented.table["job_size"]) == 1  # B: 8 GPUs x 1 h


def test_padding_masks_and_ranges(hetero_cluster, busy):
    features = build_features(_state(hetero_cluster, _jobs(), busy), max_queue=8)
    assert features.observation.shape == (8, OBS_FEATURES)
    assert features.critic.shape == (8, CRITIC_FEATURES)
    assert features.valid.tolist() == [True] * 5 + [False] * 3
    assert not features.observation[5:].any() and not features.critic[5:].any()
    assert not features.can_start[5:].any()
    flat = features.flat()
    assert flat.dtype == np.float32 and flat.min() >= 0.0 and flat.max() <= 1.0
    for name, values in features.table.items():
        assert np.all((values >= 0) & (values <= 1)), name


def test_queue_is_cut_to_the_oldest_max_queue_jobs(hetero_cluster, busy):
    features = build_features(_state(hetero_cluster, _jobs(), busy), max_queue=3)
    assert features.queue.tolist() == [0, 1, 2]
    assert features.valid.all() and features.observation.shape == (3, OBS_FEATURES)


def test_empty_queue(hetero_cluster, busy):
    jobs = _jobs()
    state = _state(hetero_cluster, jobs, busy)
    state.queue = np.zeros(0, dtype=np.int64)
    features = build_features(state, max_queue=4)
    assert not features.valid.any() and not features.observation.any()
