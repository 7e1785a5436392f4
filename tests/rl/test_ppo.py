import numpy as np
import pytest
import torch

from hetsched.core.config import validate_config
from hetsched.core.errors import ConfigError
from hetsched.rl import (
    FactoredActorCritic,
    PPOConfig,
    RolloutBatch,
    compute_gae,
    epsilon_at,
    one_step_advantages,
    ppo_update,
    train,
)


def test_gae_matches_a_hand_computation_and_stops_at_episode_ends():
    rewards = torch.tensor([1.0, 0.0, 2.0])
    values = torch.tensor([0.5, 0.2, 1.0])
    ends = torch.tensor([False, True, False])
    adv, ret = compute_gae(rewards, values, ends, next_value=3.0, gamma=0.9, gae_lambda=0.5)
    d2 = 2.0 + 0.9 * 3.0 - 1.0
    d1 = 0.0 - 0.2  # episode ended: no bootstrap
    d0 = 1.0 + 0.9 * 0.2 - 0.5
    expected = torch.tensor([d0 + 0.45 * d1, d1, d2])
    assert torch.allclose(adv, expected)
    assert torch.allclose(ret, expected + values)


def test_one_step_returns_are_the_rewards():
    adv, ret = one_step_advantages(torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.5]))
    assert torch.equal(ret, torch.tensor([1.0, -2.0]))
    assert torch.equal(adv, torch.tensor([0.5, -2.5]))


def test_epsilon_decays_linearly_then_holds():
    config = PPOConfig(epsilon_max=0.5, epsilon_min=0.1, epsilon_decay_steps=100)
    assert epsilon_at(0, config) == 0.5
    assert epsilon_at(50, config) == pytest.approx(0.3)
    assert epsilon_at(100, config) == pytest.approx(0.1)
    assert epsilon_at(10_000, config) == pytest.approx(0.1)


def test_bad_config_is_rejected_naming_the_field():
    with pytest.raises(ConfigError, match="clip_coef"):
        validate_config({"clip_coef": -1}, PPOConfig)
    with pytest.raises(ConfigError, match="epsilon_min"):
        validate_config({"epsilon_min": 0.5, "epsilon_max": 0.1}, PPOConfig)


def test_agent_output_shapes_and_masks():
    agent = FactoredActorCritic(obs_dim=5, head_sizes=(3, 4, 2))
    obs = torch.randn(7, 5)
    mask = torch.ones(7, 9, dtype=torch.bool)
    mask[:, 0:2] = False  # only server 2 valid
    out = agent.get_action_and_value(obs, mask, epsilon=0.5)
    assert out.action.shape == (7, 3)
    assert out.log_prob.shape == out.entropy.shape == out.value.shape == (7,)
    assert (out.action[:, 0] == 2).all()
    again = agent.get_action_and_value(obs, mask, out.action, epsilon=0.5)
    assert torch.allclose(again.log_prob, out.log_prob)


def test_numpy_logits_equal_torch_logits_and_follow_weight_updates():
    agent = FactoredActorCritic(obs_dim=5, head_sizes=(3, 4, 2), hidden_sizes=(8, 6))
    obs = torch.randn(5)
    with torch.no_grad():
        expected = agent.logits(obs[None])[0].numpy()
        assert np.allclose(agent.logits_numpy(obs.numpy()), expected, atol=1e-6)
        agent.policy_head.bias += 1.0  # views of the live weights: no stale copy
        assert np.allclose(agent.logits_numpy(obs.numpy()), expected + 1.0, atol=1e-6)
        agent.double()  # replaces every parameter: the views must follow
        agent.policy_head.bias -= 1.0
        assert np.allclose(agent.logits_numpy(obs.numpy()), expected, atol=1e-6)


def test_a_ppo_update_improves_a_toy_bandit():
    torch.manual_seed(0)
    agent = FactoredActorCritic(obs_dim=1, head_sizes=(4,))
    config = PPOConfig(advantage="one_step", num_steps=64, learning_rate=1e-2, ent_coef=0.0)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate)
    obs = torch.ones(64, 1)

    def prob_best() -> float:
        with torch.no_grad():
            dist, _ = agent.distribution(obs[:1])
        return dist.heads[0].log_probs[0, 2].exp().item()

    before = prob_best()
    for _ in range(5):
        with torch.no_grad():
            out = agent.get_action_and_value(obs)
        rewards = (out.action[:, 0] == 2).float()
        adv, ret = one_step_advantages(rewards, out.value)
        batch = RolloutBatch(obs, out.action, out.log_prob, out.value, adv, ret, torch.zeros(64))
        stats = ppo_update(agent, optimizer, batch, config)
    assert prob_best() > before + 0.3
    assert {"losses/policy_loss", "losses/value_loss", "losses/entropy"} <= set(stats)


def test_train_learns_a_masked_bandit_with_gae(bandit_env):
    env = bandit_env(masked=(2,), best=2)  # the "best" arm is masked: arm 0-3 except 2 pay 0
    env.best = 3
    config = PPOConfig(total_timesteps=768, num_steps=64, learning_rate=2e-2, seed=1, gamma=0.0)
    result = train(config, env)
    with torch.no_grad():
        dist, _ = result.agent.distribution(
            torch.tensor([[0.5, 0.5]]), torch.tensor([[True, True, False, True]])
        )
    probs = dist.heads[0].log_probs.exp()[0]
    assert probs[2] == 0
    assert probs[3] > 0.8
    assert len(result.history) == 12


def test_train_credits_delayed_rewards_to_their_own_decisions(bandit_env):
    env = bandit_env(delay=3, length=32, multi=True)
    config = PPOConfig(
        advantage="one_step",
        total_timesteps=1024,
        num_steps=64,
        learning_rate=2e-2,
        seed=2,
        epsilon_max=0.5,
        epsilon_min=0.05,
        epsilon_decay_steps=512,
    )
    result = train(config, env)
    assert result.history[-1]["charts/dropped_uncredited"] == 0
    with torch.no_grad():
        dist, _ = result.agent.distribution(torch.tensor([[0.5, 0.5]]))
    assert dist.heads[0].log_probs.exp()[0, 2] > 0.7
    assert dist.heads[1].log_probs.exp()[0, 1] > 0.7
    assert result.episode_returns[-1] > result.episode_returns[0]


def test_running_std_matches_numpy_and_scaled_training_reports_raw_returns(bandit_env):
    import numpy as np

    from hetsched.rl.advantages import RunningStd

    values = np.random.default_rng(0).normal(3.0, 2.0, 500)
    running = RunningStd()
    running.update(values[:200].tolist())
    running.update(values[200:].tolist())
    assert running.std == pytest.approx(values.std())
    config = PPOConfig(total_timesteps=128, num_steps=64, scale_rewards=True, advantage="one_step")
    result = train(config, bandit_env())
    assert 0.0 <= result.history[-1]["charts/mean_return"] <= 1.0  # raw bandit payoffs


class _QueueEnv:
    """A masked, zero-padded queue of up to 6 jobs with 2 features; picking the job with the
    largest first feature pays 1 (the shape of RLTune's per-job scoring decision)."""

    def __init__(self):
        import gymnasium as gym
        import numpy as np

        self.np = np
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(12,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(6)
        self.rng = np.random.default_rng(0)

    def _obs(self):
        n = int(self.rng.integers(2, 7))
        self.jobs = self.np.zeros((6, 2), dtype=self.np.float32)
        self.jobs[:n] = self.rng.random((n, 2))
        self.mask = self.np.arange(6) < n
        return self.jobs.ravel(), {"action_mask": self.mask}

    def reset(self, *, seed=None, options=None):
        return self._obs()

    def step(self, action):
        assert self.mask[action], "picked a padded slot"
        best = int(self.np.argmax(self.np.where(self.mask, self.jobs[:, 0], -1)))
        obs, info = self._obs()
        return obs, float(action == best), False, False, info


class _JobScorer(torch.nn.Module):
    """Shared per-job scoring MLP over the padded queue + a critic (RLTune's agent shape)."""

    def __init__(self):
        super().__init__()
        self.score = torch.nn.Sequential(
            torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
        )
        self.critic = torch.nn.Linear(12, 1)

    def get_action_and_value(self, obs, mask=None, action=None, epsilon=None):
        from hetsched.rl import ActionAndValue, MaskedCategorical

        logits = self.score(obs.view(-1, 6, 2)).squeeze(-1)
        dist = MaskedCategorical(logits, mask)
        if action is None:
            action = dist.sample()
        action = action.view(-1)
        value = self.critic(obs).squeeze(-1)
        return ActionAndValue(action, dist.log_prob(action), dist.entropy(), value)


def test_train_accepts_a_custom_per_job_scoring_agent_over_a_masked_queue():
    config = PPOConfig(total_timesteps=2048, num_steps=256, learning_rate=1e-2, gamma=0.0, seed=0)
    result = train(config, _QueueEnv(), _JobScorer())
    returns = [h["charts/mean_return"] for h in result.history]
    assert returns[-1] > returns[0] + 0.2
