"""Proximal Policy Optimisation, readable top to bottom (modelled on CleanRL's ``ppo.py``).

Shared by the Slim Scheduler router (Slim eqs. 2-13) and the RLTune job prioritiser. What it has
that a textbook PPO lacks is what those two papers need:

* **factored categorical heads** (server, width, group: Slim eqs. 2-4) from one shared MLP;
* **action masks** (padded queue slots in RLTune), passed by the environment as
  ``info["action_mask"]`` (the Gymnasium convention, as in ``Taxi-v3``);
* **ε-mixed exploration** on chosen heads with a linear ε decay (Slim eq. 5) whose mixture is part
  of the log-likelihood in the PPO ratio (eqs. 6, 9);
* two advantage estimators: **GAE** (RLTune) and the Slim paper's **one-step returns**
  ``R_t = r_t, A_t = R_t - V_old(s_t)`` (eq. 8), with **delayed credit**: an environment whose
  reward for a decision only arrives later (a routed block completes seconds after it was routed)
  reports ``info["decision_id"]`` for each step and
  ``info["reward_credits"] = [(decision_id, reward), ...]`` when rewards arrive; the trainer then
  gives each decision its own reward, however late.

Then the usual: advantage normalisation (eq. 8), clipped surrogate (eq. 10), value loss (eq. 11),
entropy bonus (eq. 12), total loss (eq. 13), K epochs of minibatch updates and gradient-norm
clipping.

Use ``train(config, env)`` for a Gymnasium environment, or ``ppo_update`` directly with your own
rollouts. Any agent works that implements :class:`ActorCritic`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from pydantic import Field, model_validator
from torch import nn

from hetsched.core.config import StrictModel
from hetsched.core.seeding import seed_everything
from hetsched.rl.advantages import RunningStd, compute_gae, one_step_advantages
from hetsched.rl.networks import ActorCritic, FactoredActorCritic


class PPOConfig(StrictModel, use_attribute_docstrings=True):
    """Hyper-parameters of PPO; defaults follow the Slim paper where it gives a value."""

    seed: int = 0
    """Seeds torch, numpy and the environment's first reset."""
    total_timesteps: int = Field(10_000, ge=1)
    """Environment steps (decisions) to train for."""
    num_steps: int = Field(256, ge=1)
    """Steps collected per rollout before each update."""
    learning_rate: float = Field(2.5e-4, gt=0)
    """Adam learning rate."""
    anneal_lr: bool = False
    """Linearly decay the learning rate to 0 over training."""
    advantage: Literal["gae", "one_step"] = "gae"
    """`gae`: generalised advantage estimation; `one_step`: R_t = r_t (Slim eq. 8)."""
    gamma: float = Field(0.99, ge=0, le=1)
    """Discount factor (GAE only)."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE λ (GAE only)."""
    num_minibatches: int = Field(4, ge=1)
    """Minibatches per epoch."""
    update_epochs: int = Field(3, ge=1)
    """K: optimisation epochs per update (Slim: K = 3)."""
    norm_adv: bool = True
    """Normalise advantages to zero mean, unit std over the batch (eq. 8)."""
    scale_rewards: bool = False
    """Divide rewards by the running std of all rewards seen, so the value loss of a shared trunk
    keeps one scale while the reward's magnitude changes by orders during training."""
    clip_coef: float = Field(0.2, gt=0)
    """ε of the clipped surrogate (eq. 10; Slim: 0.2)."""
    vf_coef: float = Field(0.5, ge=0)
    """c_v, weight of the value loss (eq. 13; Slim: 0.5)."""
    ent_coef: float = Field(0.01, ge=0)
    """c_H, weight of the entropy bonus (eq. 13)."""
    max_grad_norm: float = Field(0.5, gt=0)
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop the epochs early when the approximate KL exceeds this (None: never)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the shared MLP of the default agent."""
    epsilon_max: float = Field(0.0, ge=0, le=1)
    """ε at step 0 of the exploration mixture (eq. 5); 0 disables it."""
    epsilon_min: float = Field(0.0, ge=0, le=1)
    """ε after the decay (eq. 5)."""
    epsilon_decay_steps: int = Field(1, ge=1)
    """T_dec: steps over which ε decays linearly from epsilon_max to epsilon_min (eq. 5)."""
    epsilon_heads: tuple[int, ...] = (0,)
    """Which action heads are ε-mixed (Slim: the server head, index 0)."""

    @model_validator(mode="after")
    def _check(self) -> PPOConfig:
        if self.epsilon_min > self.epsilon_max:
            raise ValueError("epsilon_min must not exceed epsilon_max")
        if self.num_steps < self.num_minibatches:
            raise ValueError("num_steps must be at least num_minibatches")
        return self


def epsilon_at(step: int, config: PPOConfig) -> float:
    """ε_t = max(ε_min, ε_max + t / T_dec · (ε_min − ε_max)) (Slim eq. 5)."""
    decayed = config.epsilon_max + step / config.epsilon_decay_steps * (
        config.epsilon_min - config.epsilon_max
    )
    return max(config.epsilon_min, decayed)


@dataclass
class RolloutBatch:
    """Transitions ready for an update; all tensors share the leading batch dimension."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    """log π̃_θold(a|s) recorded when acting (eq. 9's denominator)."""
    values: torch.Tensor
    """V_θold(s) recorded when acting."""
    advantages: torch.Tensor
    returns: torch.Tensor
    epsilons: torch.Tensor
    """ε used when acting, so the update evaluates the same mixture (eq. 6)."""
    masks: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.obs.shape[0])


def ppo_update(
    agent: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: RolloutBatch,
    config: PPOConfig,
) -> dict[str, float]:
    """K epochs of clipped-PPO minibatch updates on ``batch`` (Slim eqs. 8-13).

    Returns:
        Namespaced statistics of the last minibatch (``losses/policy_loss`` ...) and
        ``losses/clipfrac`` averaged over all minibatches.
    """
    advantages = batch.advantages
    if config.norm_adv and len(batch) > 1:  # eq. 8: Â = (A − μ_A) / (σ_A + ε) over the batch
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    minibatch_size = max(1, math.ceil(len(batch) / config.num_minibatches))
    clipfracs: list[float] = []
    stats: dict[str, float] = {}
    for _epoch in range(config.update_epochs):
        order = torch.randperm(len(batch))
        for start in range(0, len(batch), minibatch_size):
            idx = order[start : start + minibatch_size]
            out = agent.get_action_and_value(
                batch.obs[idx],
                batch.masks[idx] if batch.masks is not None else None,
                batch.actions[idx],
                batch.epsilons[idx],
            )
            log_ratio = out.log_prob - batch.log_probs[idx]
            ratio = log_ratio.exp()  # eq. 9
            with torch.no_grad():
                approx_kl = ((ratio - 1) - log_ratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > config.clip_coef).float().mean().item())
            adv = advantages[idx]
            surrogate = torch.min(  # eq. 10
                ratio * adv, torch.clamp(ratio, 1 - config.clip_coef, 1 + config.clip_coef) * adv
            )
            policy_loss = -surrogate.mean()
            value_loss = 0.5 * ((out.value - batch.returns[idx]) ** 2).mean()  # eq. 11
            entropy = out.entropy.mean()  # eq. 12
            loss = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy  # eq. 13
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
            optimizer.step()
            stats = {
                "losses/policy_loss": policy_loss.item(),
                "losses/value_loss": value_loss.item(),
                "losses/entropy": entropy.item(),
                "losses/approx_kl": approx_kl.item(),
            }
        if config.target_kl is not None and stats["losses/approx_kl"] > config.target_kl:
            break
    stats["losses/clipfrac"] = float(np.mean(clipfracs)) if clipfracs else 0.0
    return stats


def action_head_sizes(space: gym.Space) -> tuple[int, ...]:
    """Head sizes for a Discrete or MultiDiscrete action space."""
    if isinstance(space, gym.spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(int(n) for n in np.asarray(space.nvec).ravel())
    raise TypeError(f"PPO needs a Discrete or MultiDiscrete action space, got {space}")


def to_env_action(space: gym.Space, action: torch.Tensor) -> Any:
    """Converts one row of agent actions to what ``env.step`` takes."""
    flat = action.reshape(-1).cpu().numpy()
    if isinstance(space, gym.spaces.Discrete):
        return int(flat[0]) + int(space.start)
    if not isinstance(space, gym.spaces.MultiDiscrete):
        raise TypeError(f"PPO acts in Discrete or MultiDiscrete spaces, not {type(space).__name__}")
    return flat.astype(np.asarray(space.nvec).dtype) + np.asarray(space.start)


@dataclass
class _Step:
    """One acted step waiting for its reward (delayed credit) or for the rollout to end."""

    obs: np.ndarray
    mask: np.ndarray | None
    action: torch.Tensor
    log_prob: float
    value: float
    epsilon: float
    reward: float = 0.0
    episode_end: bool = False


@dataclass
class TrainResult:
    """The trained agent and what happened while training."""

    agent: ActorCritic
    history: list[dict[str, float]] = field(default_factory=list)
    """One record per update: ``global_step``, losses, ``charts/*``."""
    episode_returns: list[float] = field(default_factory=list)


def _stack_batch(
    steps: Sequence[_Step], advantages: torch.Tensor, returns: torch.Tensor
) -> RolloutBatch:
    masks = None
    step_masks = [s.mask for s in steps if s.mask is not None]
    if step_masks:
        if len(step_masks) != len(steps):
            raise ValueError("an environment gives an action mask at every step or at none")
        masks = torch.as_tensor(np.stack(step_masks), dtype=torch.bool)
    return RolloutBatch(
        obs=torch.as_tensor(np.stack([s.obs for s in steps]), dtype=torch.float32),
        actions=torch.cat([s.action for s in steps]),
        log_probs=torch.tensor([s.log_prob for s in steps], dtype=torch.float32),
        values=torch.tensor([s.value for s in steps], dtype=torch.float32),
        advantages=advantages,
        returns=returns,
        epsilons=torch.tensor([s.epsilon for s in steps], dtype=torch.float32),
        masks=masks,
    )


def _observe(obs: Any, info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    mask = info.get("action_mask")
    flat = np.asarray(obs, dtype=np.float32).ravel()
    return flat, (np.asarray(mask, dtype=bool).ravel() if mask is not None else None)


def train(
    config: PPOConfig,
    env: gym.Env,
    agent: ActorCritic | None = None,
    *,
    progress: bool = False,
    on_update: Callable[[int, dict[str, float], ActorCritic], None] | None = None,
) -> TrainResult:
    """Trains ``agent`` (default: a :class:`FactoredActorCritic`) on ``env`` with PPO.

    Args:
        config: Hyper-parameters.
        env: A Gymnasium env with a Box observation and a Discrete/MultiDiscrete action space; it
            may put ``action_mask`` and (for delayed credit) ``decision_id`` / ``reward_credits`` in
            its ``info`` (see the module docstring).
        agent: Any :class:`ActorCritic`; built from the spaces when None.
        progress: Show a rich progress bar.
        on_update: Called after each update with (update index, stats, agent): checkpoints, curves.
    """
    seed_everything(config.seed)
    if agent is None:
        agent = FactoredActorCritic(
            gym.spaces.flatdim(env.observation_space),
            action_head_sizes(env.action_space),
            config.hidden_sizes,
            config.epsilon_heads,
        )
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)
    result = TrainResult(agent)
    raw_obs, info = env.reset(seed=config.seed)
    obs, mask = _observe(raw_obs, info)
    episode, episode_return, global_step, dropped = 0, 0.0, 0, 0
    waiting: dict[tuple[int, int], _Step] = {}  # one-step mode: decisions awaiting their reward
    ready: list[_Step] = []  # one-step mode: decisions with their reward
    num_updates = math.ceil(config.total_timesteps / config.num_steps)
    reward_std = RunningStd()

    from rich.progress import Progress

    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("PPO", total=num_updates * config.num_steps)
        for update in range(1, num_updates + 1):
            if config.anneal_lr:
                optimizer.param_groups[0]["lr"] = config.learning_rate * (
                    1.0 - (update - 1) / num_updates
                )
            rollout: list[_Step] = []
            for _ in range(config.num_steps):
                epsilon = epsilon_at(global_step, config)
                with torch.no_grad():
                    out = agent.get_action_and_value(
                        torch.as_tensor(obs).unsqueeze(0),
                        torch.as_tensor(mask).unsqueeze(0) if mask is not None else None,
                        epsilon=epsilon,
                    )
                step = _Step(obs, mask, out.action, out.log_prob.item(), out.value.item(), epsilon)
                decision_id = info.get("decision_id")
                raw_obs, reward, terminated, truncated, info = env.step(
                    to_env_action(env.action_space, out.action)
                )
                global_step += 1
                episode_return += float(reward)
                step.reward, step.episode_end = float(reward), bool(terminated or truncated)
                rollout.append(step)
                if config.advantage == "one_step":
                    credits = info.get("reward_credits")
                    if credits is None or decision_id is None:
                        ready.append(step)  # the step's own reward belongs to its action
                    else:
                        waiting[(episode, int(decision_id))] = step
                        for credited_id, credited_reward in credits:
                            credited = waiting.pop((episode, int(credited_id)))
                            credited.reward = float(credited_reward)
                            ready.append(credited)
                if terminated or truncated:
                    result.episode_returns.append(episode_return)
                    dropped += sum(1 for key in waiting if key[0] == episode)
                    waiting = {k: v for k, v in waiting.items() if k[0] != episode}
                    episode, episode_return = episode + 1, 0.0
                    raw_obs, info = env.reset()
                obs, mask = _observe(raw_obs, info)
                bar.advance(task)

            batch_steps = rollout if config.advantage == "gae" else ready
            reward_std.update([s.reward for s in batch_steps])
            scale = 1.0 / (reward_std.std + 1e-8) if config.scale_rewards else 1.0
            if config.advantage == "gae":
                with torch.no_grad():
                    next_value = agent.get_action_and_value(
                        torch.as_tensor(obs).unsqueeze(0),
                        torch.as_tensor(mask).unsqueeze(0) if mask is not None else None,
                    ).value.item()
                advantages, returns = compute_gae(
                    torch.tensor([s.reward * scale for s in rollout]),
                    torch.tensor([s.value for s in rollout]),
                    torch.tensor([s.episode_end for s in rollout]),
                    next_value,
                    config.gamma,
                    config.gae_lambda,
                )
            else:
                batch_steps, ready = ready, []
                if not batch_steps:
                    continue
                advantages, returns = one_step_advantages(
                    torch.tensor([s.reward * scale for s in batch_steps]),
                    torch.tensor([s.value for s in batch_steps]),
                )
            batch = _stack_batch(batch_steps, advantages.float(), returns.float())
            stats = ppo_update(agent, optimizer, batch, config)
            stats.update(
                {
                    "global_step": float(global_step),
                    "charts/learning_rate": optimizer.param_groups[0]["lr"],
                    "charts/epsilon": epsilon_at(global_step, config),
                    "charts/mean_return": float(batch.returns.mean()) / scale,
                    "charts/batch_size": float(len(batch)),
                    "charts/dropped_uncredited": float(dropped),
                }
            )
            if result.episode_returns:
                stats["charts/episodic_return"] = result.episode_returns[-1]
            result.history.append(stats)
            if on_update is not None:
                on_update(update, stats, agent)
    return result
