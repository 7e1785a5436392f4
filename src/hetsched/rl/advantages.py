"""Advantage estimators and reward scaling of PPO (GAE for RLTune, one-step returns for Slim).

Split from :mod:`hetsched.rl.ppo`: these are pure functions of a rollout, tested on their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    episode_ends: torch.Tensor,
    next_value: float,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 11 there).

    δ_t = r_t + γ V(s_{t+1}) (1 − end_t) − V(s_t);  A_t = δ_t + γ λ (1 − end_t) A_{t+1}.

    Args:
        rewards: Reward per step, shape ``(T,)``.
        values: V(s_t) per step, shape ``(T,)``.
        episode_ends: True where step t ended its episode (no bootstrap across it).
        next_value: V of the observation after the last step.

    Returns:
        ``(advantages, returns)`` with returns = advantages + values.
    """
    advantages = torch.zeros_like(rewards)
    last = torch.zeros(())
    for t in reversed(range(len(rewards))):
        following = next_value if t == len(rewards) - 1 else values[t + 1]
        nonterminal = 1.0 - float(episode_ends[t])
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last = delta + gamma * gae_lambda * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values


def one_step_advantages(
    rewards: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slim eq. 8: R_t = r_t and A_t = R_t − V_θold(s_t). Returns ``(advantages, returns)``."""
    return rewards - values, rewards.clone()


class RunningStd:
    """Running standard deviation of a stream of scalars (Welford's algorithm)."""

    def __init__(self) -> None:
        self.count, self.mean, self._m2 = 0, 0.0, 0.0

    def update(self, values: Sequence[float]) -> None:
        for value in values:
            self.count += 1
            delta = value - self.mean
            self.mean += delta / self.count
            self._m2 += delta * (value - self.mean)

    @property
    def std(self) -> float:
        return math.sqrt(self._m2 / self.count) if self.count > 1 else 1.0
