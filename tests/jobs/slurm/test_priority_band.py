"""Where managed priorities go: just above what Slurm's own plugin hands out, read from a captured
``scontrol show config`` (priority/basic and priority/multifactor on 22.05)."""

from __future__ import annotations

import pytest

from hetsched.jobs.slurm.priorities import SLURM_MAX_PRIORITY
from hetsched.jobs.slurm.priority_band import (
    BASIC_TOP_PRIORITY,
    MIN_RANKS,
    PriorityPlugin,
    managed_range,
    parse_show_config,
    priority_plugin,
)

from .conftest import FIXTURES


def captured(plugin: str) -> dict[str, str]:
    return parse_show_config((FIXTURES / f"scontrol_show_config_{plugin}_22.05.txt").read_text())


def test_captured_configs_name_their_plugin():
    basic, multifactor = captured("basic"), captured("multifactor")
    assert basic["PriorityType"] == "priority/basic"
    assert multifactor["PriorityWeightJobSize"] == "1000"
    assert priority_plugin(basic) == PriorityPlugin("priority/basic", BASIC_TOP_PRIORITY)
    assert priority_plugin(multifactor) == PriorityPlugin("priority/multifactor", 5000)
    assert not priority_plugin(basic).restores_by_release
    assert priority_plugin(multifactor).restores_by_release


@pytest.mark.parametrize(
    ("changes", "ceiling"),
    [
        ({"PriorityWeightTRES": "CPU=1000,GRES/gpu=3000"}, 9000),
        ({"PriorityWeightAssoc": "250"}, 5250),
        ({"PriorityWeightAge": "lots"}, None),
        ({"PriorityWeightTRES": "CPU=-5"}, None),
        ({"PrioritySiteFactorPlugin": "site_factor/example"}, None),
        ({"PriorityType": "priority/custom"}, None),
    ],
)
def test_multifactor_ceiling_is_the_sum_of_weights_or_unknown(changes, ceiling):
    assert priority_plugin({**captured("multifactor"), **changes}).ceiling == ceiling


def test_band_above_multifactor():
    band = managed_range(PriorityPlugin("priority/multifactor", 5000), 0, 100)
    assert (band.bottom, band.step, band.top) == (5001, 100, 5001 + 100 * 9999)


def test_band_above_basic_shrinks_its_step_to_fit():
    band = managed_range(PriorityPlugin("priority/basic", BASIC_TOP_PRIORITY), 0, 100)
    assert band.bottom == BASIC_TOP_PRIORITY + 1 and band.top == SLURM_MAX_PRIORITY
    assert (band.top - band.bottom) // band.step + 1 >= MIN_RANKS


def test_band_clears_the_highest_unmanaged_job():
    band = managed_range(PriorityPlugin("priority/multifactor", 5000), 2_000_000, 100)
    assert band.bottom == 2_000_001


def test_unknown_ceiling_and_crowded_top_warn(caplog):
    with caplog.at_level("WARNING", logger="hetsched.jobs.slurm"):
        band = managed_range(PriorityPlugin("priority/custom", None), 70, 10)
        assert band.bottom == 71
        crowded = managed_range(
            PriorityPlugin("priority/basic", BASIC_TOP_PRIORITY), 4_294_967_000, 10
        )
    assert crowded.bottom == SLURM_MAX_PRIORITY - MIN_RANKS + 1 and crowded.step == 1
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "unknown" in messages and "cannot all be placed above" in messages
