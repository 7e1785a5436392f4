"""The load-aware baselines: least-loaded and the two Trimaran-style rules."""

from __future__ import annotations

import pytest

from hetsched.tail.load_scoring import (
    least_loaded_scores,
    load_risk_scores,
    target_load_score,
    target_load_scores,
)
from hetsched.tail.node_features import NodeCapacity


def _cap(cores: int, u: float, runq: float | None = None) -> NodeCapacity:
    return NodeCapacity("n", cores, 2.3, u, u, runq_per_core=runq)


def test_least_loaded_reads_the_run_queue_past_full_utilisation():
    # both 100 % busy; utilisation alone ties them, the run queue does not
    scores = least_loaded_scores([_cap(4, 1.0, runq=1.2), _cap(4, 1.0, runq=10.0), _cap(4, 0.5)])
    assert scores == [-1.2, -10.0, -0.5]


def test_load_risk_adds_the_pod_and_the_variation():
    quiet, small = _cap(16, 0.25), _cap(4, 0.25)
    assert load_risk_scores([quiet, small], 1.0) == [
        pytest.approx((1 - (0.25 + 1 / 16) / 2) * 100),
        pytest.approx((1 - (0.25 + 1 / 4) / 2) * 100),
    ]
    steady, jumpy = load_risk_scores([quiet, quiet], 1.0, load_std=[0.0, 0.4])
    assert steady - jumpy == pytest.approx(20.0)
    assert load_risk_scores([_cap(2, 1.0)], 2.0, load_std=[1.0]) == [0.0]


def test_target_load_packs_up_to_the_target_then_spreads():
    assert target_load_score(0.0) == 40.0 and target_load_score(40.0) == 100.0
    assert target_load_score(20.0) == pytest.approx(70.0)
    assert target_load_score(70.0) == pytest.approx(20.0) and target_load_score(100.0) == 0.0
    assert target_load_score(130.0) == 0.0
    # a 16-core node at 10 % gets the pod before an empty one (packing), a full one gets nothing
    empty, light, full = target_load_scores([_cap(16, 0.0), _cap(16, 0.1), _cap(4, 1.0)], 1.0)
    assert light > empty > full == 0.0
