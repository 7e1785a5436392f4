"""The learned router's training on tiny budgets: cloning, fine-tuning, selection, resume."""

import csv

import numpy as np
import pytest
import torch

from hetsched.core.errors import ConfigError, DataError
from hetsched.slim.router_training.behaviour_cloning import (
    Demonstrations,
    clone,
    collect_demonstrations,
    record_episode,
)
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.learned_training import (
    LearnedRouterConfig,
    train_learned_router,
)
from hetsched.slim.router_training.scenario_mix import (
    ScenarioMix,
    mix_encoder,
    training_mix,
    training_scenario_names,
)
from hetsched.slim.router_training.teachers import FixedTeacher
from hetsched.slim.router_training.validation import episode_score
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.ppo import PPORouter, new_policy
from hetsched.slim.routers.reward import REWARD_PRESETS
from hetsched.slim.sim.scenario_catalog import load_scenario

TINY = LearnedRouterConfig(
    scenarios=("lan-1.5x", "bursty-3x"), images=60, advisors=("jsq-0.25", "slackfit"),
    demo_episodes=2, bc_epochs=3, ppo_steps=128, rollout=32, chunk_updates=2,
    validation_episodes=1, hidden_sizes=(16,), action="placement", teacher="best",
    dagger_rounds=0,
)  # fmt: skip


def test_the_mix_never_trains_on_held_out_scenarios_and_randomises_per_seed():
    assert "failure" not in training_scenario_names() and "lan-3x" in training_scenario_names()
    with pytest.raises(ConfigError, match="failure held out"):
        ScenarioMix({"failure": load_scenario("failure")})
    mix = training_mix(["lan-3x"], images=50)
    first, again, other = mix.draw(1)[1], mix.draw(1)[1], mix.draw(2)[1]
    assert first == again and first != other and first.num_images == 50
    assert 0.7 * 3.0 <= first.load_factor <= 1.3 * 3.0
    assert mix.validation_episodes(2)[1][1].load_factor == 3.0  # validation: as named


def test_cloning_the_best_rule_reproduces_it():
    mix = training_mix(["lan-1.5x"], images=60, randomize=False)
    encoder = mix_encoder(mix, ("jsq-0.5", "jsq-0.25"))
    weights = REWARD_PRESETS["slo"]
    demos = collect_demonstrations(
        lambda make: SlimRoutingEnv(make, encoder, weights), mix.cluster,
        ("jsq-0.5", "jsq-0.25"), [0, 1], episode_score,
    )  # fmt: skip
    assert sum(demos.teachers.values()) == 2 and len(demos) > 50
    torch.manual_seed(0)
    policy = new_policy(encoder, (32,))
    history = clone(policy, demos, epochs=30, learning_rate=1e-2)
    assert history[-1]["agreement"] > 0.98
    teacher = max(demos.teachers, key=demos.teachers.__getitem__)
    learned = PPORouter(policy=policy, encoder=encoder, greedy=True)
    assert episode_score(mix.cluster(5), learned) == episode_score(
        mix.cluster(5), ROUTERS.create(teacher)
    )


def test_training_writes_the_best_router_curves_and_resumes_exactly(tmp_path):
    whole = train_learned_router(TINY, tmp_path / "whole", progress=False)
    rows = list(csv.DictReader((tmp_path / "whole" / "learned-curves.csv").open()))
    assert [r["phase"] for r in rows] == ["bc", "ppo", "ppo"]
    assert (tmp_path / "whole" / "learned-curves.png").is_file()
    assert whole.best.score == max(float(r["score"]) for r in rows)
    assert whole.best.score >= float(rows[0]["score"])  # never worse than the cloned rule
    router = ROUTERS.create("learned", checkpoint=whole.checkpoint)
    assert router.greedy and router.encoder.advisors == TINY.advisors
    half = TINY.model_copy(update={"ppo_steps": 64})
    train_learned_router(half, tmp_path / "split", progress=False)
    resumed = train_learned_router(TINY, tmp_path / "split", resume=True, progress=False)
    assert resumed.history == whole.history
    saved = [
        torch.load(tmp_path / run / "train-state.pt", weights_only=True)
        for run in ("whole", "split")
    ]
    for key, value in saved[0]["policy"].items():
        assert torch.equal(value, saved[1]["policy"][key])
    with pytest.raises(DataError, match="changed: images"):
        train_learned_router(
            TINY.model_copy(update={"images": 61}), tmp_path / "split", resume=True
        )
    with pytest.raises(DataError, match="no training state"):
        train_learned_router(TINY, tmp_path / "none", resume=True)


def test_advice_training_starts_as_its_teacher_and_refuses_a_teacher_it_cannot_follow(tmp_path):
    config = TINY.model_copy(update={"action": "advice", "teacher": "slackfit", "ppo_steps": 0})
    result = train_learned_router(config, tmp_path / "advice", progress=False)
    router = ROUTERS.create("learned", checkpoint=result.checkpoint)
    cluster = training_mix(["lan-1.5x"], images=60, randomize=False).cluster
    assert episode_score(cluster(7), router) == episode_score(
        cluster(7), ROUTERS.create("slackfit")
    )
    with pytest.raises(ConfigError, match="one of the advisors"):
        train_learned_router(
            TINY.model_copy(update={"action": "advice", "teacher": "jsq-0.5"}), tmp_path / "x"
        )


def test_dagger_records_the_teachers_labels_on_the_states_the_driver_leads_to():
    mix = training_mix(["lan-1.5x"], images=60, randomize=False)
    encoder = mix_encoder(mix, ("jsq-0.25", "slackfit"), "advice")
    env = SlimRoutingEnv(mix.cluster, encoder, REWARD_PRESETS["slo"])
    demos = Demonstrations()
    record_episode(env, FixedTeacher("slackfit", 3), 3, demos, driver=ROUTERS.create("jsq-0.25"))
    assert {int(action[0]) for action in demos.actions} == {1}  # every label: slackfit's index
    alone = Demonstrations()  # the same episode with jsq-0.25 acting and labelling
    record_episode(env, FixedTeacher("jsq-0.25", 3), 3, alone)
    assert {int(action[0]) for action in alone.actions} == {0}
    assert len(demos) == len(alone) > 50
    assert all(np.array_equal(a, b) for a, b in zip(demos.obs, alone.obs, strict=True))


def test_dagger_rounds_are_validated_after_cloning(tmp_path):
    config = TINY.model_copy(update={"action": "advice", "teacher": "per-episode",
                                     "dagger_rounds": 2, "ppo_steps": 0})  # fmt: skip
    result = train_learned_router(config, tmp_path / "dagger", progress=False)
    assert [row["phase"] for row in result.history] == ["bc", "dagger", "dagger"]
    router = ROUTERS.create("learned", checkpoint=result.checkpoint)
    assert router.encoder.kind == "advice"
