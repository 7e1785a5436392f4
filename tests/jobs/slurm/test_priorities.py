"""Score-to-priority mapping and oversubscribe advice on hand-made clusters."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import ConfigError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import JobRequest, PackPlacer, SpreadPlacer
from hetsched.jobs.slurm.priorities import (
    Advice,
    PriorityRange,
    placement_advice,
    scores_to_priorities,
)


def test_lower_score_gets_higher_priority():
    priorities = scores_to_priorities(np.array([3.0, -1.0, 2.0]), PriorityRange(1000, 10, 1))
    assert priorities.tolist() == [980, 1000, 990]


def test_ties_share_a_priority_and_nan_ranks_last():
    scores = np.array([5.0, np.nan, 5.0, 1.0, np.inf])
    priorities = scores_to_priorities(scores, PriorityRange(100, 10, 1))
    assert priorities.tolist() == [90, 80, 90, 100, 80]


def test_priorities_stop_at_the_floor():
    priorities = scores_to_priorities(np.arange(5.0), PriorityRange(top=30, step=10, bottom=5))
    assert priorities.tolist() == [30, 20, 10, 5, 5]
    assert scores_to_priorities(np.zeros(0), PriorityRange()).size == 0


def test_a_rank_keeps_its_priority_when_others_join():
    """A fixed step: adding a worse job leaves the others' priorities as they were."""
    before = scores_to_priorities(np.array([1.0, 2.0]), PriorityRange())
    after = scores_to_priorities(np.array([1.0, 2.0, 9.0]), PriorityRange())
    assert after[:2].tolist() == before.tolist()


@pytest.mark.parametrize(
    "kwargs", [{"bottom": 0}, {"top": 5, "bottom": 6}, {"step": 0}, {"top": 2**32}]
)
def test_bad_range_is_rejected(kwargs):
    with pytest.raises(ConfigError):
        PriorityRange(**kwargs)


def two_nodes(used_on_first: int) -> ClusterState:
    cluster = Cluster([Node("a", "gpu", 4, 8.0), Node("b", "gpu", 4, 8.0)])
    state = ClusterState(cluster)
    state.free_gpus[0] -= used_on_first
    state.free_cpus[0] -= used_on_first
    return state


def request(gpus: int, nodes: int = 2) -> JobRequest:
    return JobRequest(gpus, float(gpus), 0.0, np.ones(nodes, dtype=bool))


def test_spread_isolates_and_pack_shares():
    state = two_nodes(used_on_first=2)
    assert placement_advice(request(1), state, SpreadPlacer()) is Advice.EXCLUSIVE
    assert placement_advice(request(1), state, PackPlacer()) is Advice.SHARED


def test_no_advice_with_one_way_to_place():
    single = ClusterState(Cluster([Node("only", "gpu", 4, 8.0)]))
    assert placement_advice(request(1, nodes=1), single, SpreadPlacer()) is None
    state = two_nodes(used_on_first=4)  # only node b fits a 4-GPU job
    assert placement_advice(request(4), state, SpreadPlacer()) is None


def test_no_advice_on_an_idle_cluster_or_when_it_does_not_fit():
    idle = two_nodes(used_on_first=0)  # every placement is alone: nothing to choose
    assert placement_advice(request(1), idle, SpreadPlacer()) is None
    full = two_nodes(used_on_first=4)
    full.free_gpus[1] = 0
    assert placement_advice(request(1), full, SpreadPlacer()) is None
