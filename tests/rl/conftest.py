import gymnasium as gym
import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    torch.set_num_threads(1)


class BanditEnv(gym.Env):
    """A contextless bandit: arm ``best`` pays 1, others 0; optional mask and delayed credit.

    With ``delay`` > 0 the reward of decision t is only reported ``delay`` steps later through
    ``info["reward_credits"]`` (the Slim router's situation); episodes last ``length`` steps and
    the last step credits every decision still waiting.
    """

    def __init__(self, n_arms=4, best=2, masked=(), delay=0, length=16, multi=False):
        self.n_arms, self.best, self.delay, self.length = n_arms, best, delay, length
        self.masked = set(masked)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = (
            gym.spaces.MultiDiscrete([n_arms, 2]) if multi else gym.spaces.Discrete(n_arms)
        )
        self.multi = multi

    def _info(self):
        mask = np.array([a not in self.masked for a in range(self.n_arms)])
        if self.multi:
            mask = np.concatenate([mask, [True, True]])
        info = {"action_mask": mask}
        if self.delay:
            info["decision_id"] = self.t
        return info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.owed = 0, []
        return np.array([0.5, 0.5], dtype=np.float32), self._info()

    def step(self, action):
        arm = int(action[0]) if self.multi else int(action)
        assert arm not in self.masked, "a masked action was taken"
        reward = 1.0 if arm == self.best else 0.0
        if self.multi and int(action[1]) == 1:
            reward += 0.5
        self.t += 1
        terminated = self.t >= self.length
        info = self._info()
        if not self.delay:
            return np.array([0.5, 0.5], dtype=np.float32), reward, terminated, False, info
        self.owed.append((self.t - 1, reward))
        due = self.owed if terminated else [c for c in self.owed if c[0] <= self.t - 1 - self.delay]
        self.owed = [c for c in self.owed if c not in due]
        info["reward_credits"] = due
        paid = sum(r for _, r in due)
        return np.array([0.5, 0.5], dtype=np.float32), paid, terminated, False, info


@pytest.fixture
def bandit_env():
    return BanditEnv
