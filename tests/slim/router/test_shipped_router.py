"""The learned router shipped in the package: it loads on a fresh install, it is what the
documented training command produces (its settings), and it routes a scenario well."""

from __future__ import annotations

from hetsched.slim.experiments.scenario_experiment import evaluate_window
from hetsched.slim.router_training.learned_training import LearnedRouterConfig
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.ppo import LearnedRouter, shipped_checkpoint
from hetsched.slim.routers.slo_features import AdviceEncoder
from hetsched.slim.sim.scenario import with_overrides
from hetsched.slim.sim.scenario_catalog import load_scenario


def test_shipped_router_loads_without_a_checkpoint_and_has_its_data_card():
    router = ROUTERS.create("learned", seed=3)
    assert isinstance(router, LearnedRouter) and router.greedy
    assert isinstance(router.encoder, AdviceEncoder)
    card = shipped_checkpoint("README.md").read_text()
    assert "hetsched slim train-router" in card and "commit" in card


def test_shipped_router_was_trained_with_the_documented_defaults():
    """The data card's command is ``train-router --seed 1`` with every other setting at its
    default: a change of the defaults without retraining fails here. A setting added since takes
    its default when the saved one is read, so it must default to what the file was trained
    with."""
    saved = LearnedRouterConfig.model_validate(LearnedRouter().metadata["config"])
    assert saved == LearnedRouterConfig(seed=1)


def test_shipped_router_meets_the_slo_under_overload_without_falling_to_the_slimmest_width():
    scenario = with_overrides(load_scenario("lan-3x"), num_images=600)
    metrics = evaluate_window(scenario, LearnedRouter(), seed=11)
    slimmest = evaluate_window(scenario, ROUTERS.create("static-slimmest", seed=11), seed=11)
    assert metrics.slo_attainment >= 0.97
    assert metrics.accuracy_pct > slimmest.accuracy_pct
