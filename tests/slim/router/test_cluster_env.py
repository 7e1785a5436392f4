import pytest
from gymnasium.utils.env_checker import check_env

from hetsched.rl import PPOConfig, train
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.routers import ROUTERS, RoutingDecision
from hetsched.slim.routers.ppo import StateEncoder
from hetsched.slim.routers.reward import RewardWeights

from .conftest import GROUPS, WIDTHS


def test_every_image_completes_all_segments_exactly_once(fake_cluster):
    cluster = fake_cluster(n_images=30)
    cluster.run(ROUTERS.create("random", seed=1))
    assert cluster.done and not cluster.fifo
    assert sorted(i.image_id for i in cluster.completed) == list(range(30))
    assert all(len(i.widths) == 4 for i in cluster.completed)
    blocks = cluster.block_outcomes
    assert sorted(d for d, _ in blocks) == list(range(cluster.decisions))
    assert sum(o.images_completed for _, o in blocks) == 30
    for image in cluster.completed:
        assert image.latency_s > 0 and image.energy_j > 0


def test_w_prev_is_the_executed_width_and_transfers_only_between_hosts(fake_cluster):
    cluster = fake_cluster(n_images=1, transfer_s=0.5)
    t0 = cluster.next_state().now_s
    cluster.route(RoutingDecision(server=0, width=0.5, group_size=1))
    assert cluster.state().servers[0].queue_length == 1  # in transit counts as queued
    state = cluster.next_state()
    assert state.now_s == pytest.approx(t0 + 0.5 + 0.005)
    assert state.head_segment == 1
    cluster.route(RoutingDecision(server=0, width=1.0, group_size=1))  # same host: no transfer
    state = cluster.next_state()
    assert state.now_s == pytest.approx(t0 + 0.5 + 0.005 + 0.01)
    cluster.route(RoutingDecision(server=1, width=0.25, group_size=1))  # other host: transfer
    state = cluster.next_state()
    assert state.now_s == pytest.approx(t0 + 0.5 + 0.005 + 0.01 + 0.5 + 0.005)
    assert cluster.servers[0].submitted == [(0, 0.5, None), (1, 1.0, 0.5)]
    assert cluster.servers[1].submitted == [(2, 0.25, 1.0)]


def test_group_size_takes_up_to_g_head_requests(fake_cluster):
    cluster = fake_cluster(n_images=10, decision_time_s=1.0)
    state = cluster.next_state()
    cluster.route(RoutingDecision(0, 1.0, 1))  # router busy 1 s: the other 9 arrive meanwhile
    state = cluster.next_state()
    assert state.fifo_length == 10  # 9 new + the first one back for segment 1
    cluster.route(RoutingDecision(1, 1.0, 4))
    assert len(cluster.fifo) == 6
    with pytest.raises(ValueError, match="out of range"):
        cluster.route(RoutingDecision(7, 1.0, 1))
    with pytest.raises(ValueError, match="invalid width"):
        cluster.route(RoutingDecision(0, 0.3, 1))


def _env(fake_cluster, weights=None, **kwargs):
    encoder = StateEncoder(3, WIDTHS, GROUPS)
    weights = weights or RewardWeights(alpha=1.0, beta=10.0, gamma=0.01, delta=1.0)
    return SlimRoutingEnv(lambda seed: fake_cluster(seed, **kwargs), encoder, weights)


def test_env_passes_gymnasium_check_env(fake_cluster):
    check_env(_env(fake_cluster), skip_render_check=True)


def test_env_credits_every_decision_once_by_episode_end(fake_cluster):
    env = _env(fake_cluster, n_images=12)
    obs, info = env.reset(seed=0)
    credited, steps, terminated = [], 0, False
    while not terminated:
        obs, reward, terminated, _truncated, info = env.step(env.action_space.sample())
        credited += [d for d, _ in info["reward_credits"]]
        assert reward == pytest.approx(sum(r for _, r in info["reward_credits"]))
        steps += 1
        assert env.observation_space.contains(obs)
    assert sorted(credited) == list(range(steps))


def test_ppo_learns_to_prefer_slim_widths_under_an_efficiency_reward(fake_cluster):
    env = _env(fake_cluster, RewardWeights(alpha=0.0, beta=10.0), n_images=40)
    config = PPOConfig(
        advantage="one_step",
        total_timesteps=2048,
        num_steps=256,
        learning_rate=1e-2,
        seed=0,
        epsilon_max=0.3,
        epsilon_min=0.05,
        epsilon_decay_steps=1000,
    )
    result = train(config, env)
    assert result.history[-1]["charts/dropped_uncredited"] == 0
    import torch

    obs, _ = env.reset(seed=5)
    with torch.no_grad():
        dist, _ = result.agent.distribution(torch.as_tensor(obs).unsqueeze(0))
    width_probs = dist.heads[1].log_probs.exp()[0]
    assert int(width_probs.argmax()) == 0  # 0.25 is the most likely width
    returns = [h["charts/mean_return"] for h in result.history]
    assert returns[-1] > returns[0]


def test_router_training_is_reproducible_per_seed(fake_cluster):
    import torch

    from hetsched.slim.router_training.trainer import train_router

    encoder = StateEncoder(3, WIDTHS, GROUPS)
    config = PPOConfig(advantage="one_step", total_timesteps=64, num_steps=32, seed=3)
    weights = RewardWeights(beta=5.0)
    runs = [
        train_router(lambda s: fake_cluster(s, n_images=8), encoder, weights, config)
        for _ in range(2)
    ]
    for a, b in zip(runs[0].policy.parameters(), runs[1].policy.parameters(), strict=True):
        assert torch.equal(a, b)
    assert runs[0].history == runs[1].history
