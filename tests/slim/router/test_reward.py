import pytest

from hetsched.core.errors import ConfigError
from hetsched.slim.routers.reward import (
    REWARD_PRESETS,
    BlockOutcome,
    RewardWeights,
    block_reward,
    reward_weights,
    utilization_variance,
)


def test_block_reward_is_eq7():
    outcome = BlockOutcome(0.7, 0.5, 120.0, (20.0, 60.0, 40.0), requests=4)
    weights = RewardWeights(alpha=2.0, beta=3.0, gamma=0.01, delta=5.0, bonus=0.25)
    variance = ((0.2 - 0.4) ** 2 + (0.6 - 0.4) ** 2 + 0.0) / 3
    assert outcome.energy_j == pytest.approx(60.0)
    assert utilization_variance(outcome.utilizations_pct) == pytest.approx(variance)
    expected = 2.0 * 0.7 - 3.0 * 0.5 - 0.01 * 60.0 - 5.0 * variance + 0.25 * 4
    assert block_reward(outcome, weights) == pytest.approx(expected)
    centred = weights.model_copy(update={"center_accuracy": True})
    assert block_reward(outcome, centred, mean_top1=0.7) == pytest.approx(expected - 1.4)
    assert block_reward(outcome, weights, missed_share=0.5) == pytest.approx(expected)  # ζ = 0


def test_the_slo_term_charges_missed_images_beyond_eq7():
    outcome = BlockOutcome(0.75, 0.02, 100.0, (50.0, 50.0), requests=4)
    slo = REWARD_PRESETS["slo"]
    met = block_reward(outcome, slo, mean_top1=0.72)
    assert met == pytest.approx(0.03 - 0.5 * 0.02)
    assert block_reward(outcome, slo, 0.72, missed_share=0.25) == pytest.approx(met - 0.25)
    narrow = BlockOutcome(0.70, 0.02, 100.0, (50.0, 50.0), requests=4)
    assert block_reward(narrow, slo, 0.72) > block_reward(outcome, slo, 0.72, missed_share=0.1)


def test_presets_weigh_cost_against_accuracy_as_tables_iv_and_v():
    efficiency, balanced = REWARD_PRESETS["efficiency"], REWARD_PRESETS["balanced"]
    assert efficiency.beta / efficiency.alpha > balanced.beta / balanced.alpha
    assert efficiency.gamma / efficiency.alpha > balanced.gamma / balanced.alpha
    assert reward_weights("balanced") is balanced
    with pytest.raises(ConfigError, match="known: balanced, efficiency, slo"):
        reward_weights("fast")
