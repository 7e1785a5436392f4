"""Router specs: a registered rule with numeric settings, parsed and never evaluated."""

import pytest

from hetsched.core.errors import ConfigError, UnknownNameError
from hetsched.slim.cli_options import names
from hetsched.slim.experiments.scenario_experiment import evaluate_window, experiment_routers
from hetsched.slim.router_training.scenario_mix import mix_encoder, training_mix
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.queue_rules import BacklogWidthRouter
from hetsched.slim.routers.specs import create_router, parse_router_spec
from hetsched.slim.sim.scenario import with_overrides
from hetsched.slim.sim.scenario_catalog import load_scenario


def test_a_spec_sets_the_rules_own_arguments_and_a_plain_name_keeps_its_defaults():
    router = create_router("backlog-width(threshold_s=0.012, wide=1.0)", seed=3)
    assert isinstance(router, BacklogWidthRouter)
    assert (router.threshold_s, router.wide, router.base) == (0.012, 1.0, 0.5)
    assert create_router("backlog-width").threshold_s == BacklogWidthRouter().threshold_s
    assert parse_router_spec("jsq-0.25") == ("jsq-0.25", {})
    assert parse_router_spec("backlog-width()") == ("backlog-width", {})
    _, settings = parse_router_spec("backlog-width(group_size=4,num_segments=4)")
    assert settings == {"group_size": 4, "num_segments": 4}
    assert all(isinstance(v, int) for v in settings.values())


def test_a_spec_routes_like_the_rule_built_with_the_same_arguments():
    scenario = with_overrides(load_scenario("bursty-3x"), num_images=2000)
    by_spec = evaluate_window(scenario, create_router("backlog-width(threshold_s=0.008)"), 0)
    by_hand = evaluate_window(scenario, BacklogWidthRouter(threshold_s=0.008), 0)
    default = evaluate_window(scenario, ROUTERS.create("backlog-width"), 0)
    assert by_spec == by_hand
    assert by_spec.accuracy_pct < default.accuracy_pct  # narrows sooner than the 16 ms default


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("backlog-width(threshold=0.01)", "'threshold' is not a setting of backlog-width"),
        ("backlog-width(seed=1)", "'seed' is not a setting"),
        ("backlog-width(threshold_s=0.01,threshold_s=0.02)", "'threshold_s' is not a setting"),
        ("backlog-width(threshold_s=nan)", "expected key=number"),
        ("backlog-width(threshold_s=1e999)", "is not finite"),
        ("backlog-width(threshold_s=1.2.3)", "is not a number"),
        ("backlog-width(group_size=2.5)", "takes a whole number"),
        ("backlog-width(threshold_s=-1)", "threshold_s must be >= 0"),
        ("backlog-width(base=1.0)", "must be narrower"),
        ("learned(checkpoint=/etc/passwd)", "expected key=number"),
        ("learned(checkpoint=http://x/y.pt)", "expected key=number"),
        ("backlog-width(threshold_s=__import__('os'))", "expected key=number"),
        ("backlog-width threshold_s=1", "expected NAME or NAME(key=number"),
        ("x" * 500, "expected NAME or NAME(key=number"),
    ],
)
def test_bad_specs_are_one_line_config_errors_naming_the_spec(spec, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
        create_router(spec)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_an_unknown_rule_in_a_spec_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"known: .*backlog-width"):
        parse_router_spec("nope(threshold_s=1)")


def test_commas_inside_a_spec_do_not_split_the_list():
    assert names("jsq-0.25, backlog-width(wide=1.0,threshold_s=0.004),slackfit") == [
        "jsq-0.25",
        "backlog-width(wide=1.0,threshold_s=0.004)",
        "slackfit",
    ]


def test_specs_are_advisors_of_the_learned_router_and_baselines_of_the_experiment():
    mix = training_mix(["bursty-3x"], images=60, randomize=False)
    encoder = mix_encoder(mix, ["jsq-0.25", "backlog-width(threshold_s=0.012)"], "advice")
    assert encoder.advisors == ("jsq-0.25", "backlog-width(threshold_s=0.012)")
    with pytest.raises(ConfigError, match="not a setting"):
        mix_encoder(mix, ["backlog-width(nope=1)"], "advice")
    factories, skipped = experiment_routers(["backlog-width(threshold_s=0.012)"], {})
    assert factories["backlog-width(threshold_s=0.012)"](0).threshold_s == 0.012
    assert not skipped
