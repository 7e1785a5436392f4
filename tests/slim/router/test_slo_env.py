"""The SLO reward's delayed credit, the environment with the extended encoder, and its gymnasium
registration."""

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import hetsched.slim.router_training  # noqa: F401 (registers hetsched/SlimRouting-v0)
from hetsched.slim.cluster.records import CompletedImage
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.slo_credit import SloCredit
from hetsched.slim.routers.reward import REWARD_PRESETS, BlockOutcome
from hetsched.slim.routers.slo_features import SloEncoder
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster

OUTCOME = BlockOutcome(0.7, 0.01, 100.0, (10.0, 20.0), requests=2)


def image(image_id, met):
    return CompletedImage(image_id, 0.1, 1.0, (1.0,) * 4, True, 0.2 if met else 0.4, 0.3)


def test_a_decision_is_credited_once_its_block_and_all_its_images_are_done():
    credit = SloCredit()
    credit.routed(0, [7, 8])
    credit.routed(1, [9])
    credit.images_done([image(7, met=True)])
    credit.block_done(0, OUTCOME)
    assert credit.take_ready() == [] and credit.waiting == 2  # image 8 still running
    credit.images_done([image(9, met=False), image(8, met=False)])
    assert credit.take_ready() == [(0, OUTCOME, 0.5)]  # decision 1 waits for its block
    credit.block_done(1, OUTCOME)
    assert credit.take_ready() == [(1, OUTCOME, 1.0)] and credit.waiting == 0


SCENARIO = ScenarioConfig(
    servers=("rtx-2080-ti", "cpu"), link="ethernet-1g", num_images=40, rate_per_s=4000,
    arrival="poisson", slo_ms=8.0,
)  # fmt: skip


def run_episode(weights, action):
    encoder = SloEncoder(2, SCENARIO.widths, SCENARIO.group_sizes, advisors=("slackfit",))
    env = SlimRoutingEnv(lambda seed: build_cluster(SCENARIO, 3), encoder, weights, 0.7)
    obs, info = env.reset(seed=0)
    total, credited, steps, terminated = 0.0, [], 0, False
    while not terminated:
        obs, reward, terminated, _, info = env.step(action)
        assert env.observation_space.contains(obs)
        total += reward
        credited += [d for d, _ in info["reward_credits"]]
        steps += 1
    missed = sum(1 for i in env.cluster.completed if not i.met_slo)
    return total, sorted(credited), steps, missed


def test_the_slo_term_charges_every_decision_for_the_misses_of_its_images():
    slo = REWARD_PRESETS["slo"]
    cpu_wide = [7, 0]  # server 1 (the CPU) at width 1.0, one request per block: most images miss
    total, credited, steps, missed = run_episode(slo, cpu_wide)
    assert credited == list(range(steps)) and missed > 20
    paper_total, paper_credited, _, _ = run_episode(
        slo.model_copy(update={"slo_miss": 0.0}), cpu_wide
    )
    assert paper_credited == credited
    # One image per block, four blocks per image: each miss is charged to its four decisions.
    assert paper_total - total == pytest.approx(4 * missed)


def test_the_registered_environment_passes_gymnasiums_checker_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("hetsched/SlimRouting-v0", scenarios=["lan-1.5x"], images=30)
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=1)
        assert obs.shape == env.observation_space.shape
        assert info["action_mask"].shape == (sum(env.action_space.nvec),)
        env.close()
