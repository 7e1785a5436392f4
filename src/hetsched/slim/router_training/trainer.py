"""Training the PPO router in the simulated cluster: checkpoints, training curves, plots.

The loop itself is :func:`hetsched.rl.train` on
:class:`~hetsched.slim.router_training.env.SlimRoutingEnv` with the paper's settings: one-step
returns credited to each block's own decision (eq. 8), an ε-mixed server head with linear decay
(eqs. 5-6), clip 0.2, c_v 0.5, K = 3, gradient-norm clipping (eqs. 9-13).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.seeding import seed_everything
from hetsched.rl import FactoredActorCritic, PPOConfig, train
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.routers.ppo import StateEncoder, new_policy, save_router
from hetsched.slim.routers.reward import RewardWeights

PAPER_PPO = PPOConfig(
    advantage="one_step",
    total_timesteps=30_000,
    num_steps=1024,
    num_minibatches=4,
    update_epochs=3,
    learning_rate=1e-3,
    anneal_lr=True,
    scale_rewards=True,
    clip_coef=0.2,
    vf_coef=0.5,
    ent_coef=0.003,
    max_grad_norm=0.5,
    epsilon_max=0.3,
    epsilon_min=0.02,
    epsilon_decay_steps=20_000,
    hidden_sizes=(64, 64),
)
"""Router PPO defaults: the paper's ε 0.2, c_v 0.5, K = 3 and one-step returns; the rest is ours."""


def ppo_budget(steps: int, rollout: int = PAPER_PPO.num_steps, seed: int = 0) -> PPOConfig:
    """:data:`PAPER_PPO` scaled to ``steps`` training decisions.

    The rollout and minibatch count shrink to fit a small budget, and ε decays over the first two
    thirds of it whatever its size, so a short demo run anneals the server-head mixture as a full
    run does.
    """
    rollout = min(rollout, steps)
    return PAPER_PPO.model_copy(
        update={
            "seed": seed,
            "total_timesteps": steps,
            "num_steps": rollout,
            "num_minibatches": min(PAPER_PPO.num_minibatches, rollout),
            "epsilon_decay_steps": max(1, int(0.66 * steps)),
        }
    )


@dataclass
class TrainedRouter:
    """A trained router policy with its training history."""

    policy: FactoredActorCritic
    encoder: StateEncoder
    history: list[dict[str, float]]
    checkpoint: Path | None


def train_router(
    make_cluster: Callable[[int], SlimCluster],
    encoder: StateEncoder,
    weights: RewardWeights,
    ppo: PPOConfig = PAPER_PPO,
    *,
    mean_top1: float = 0.0,
    out_dir: Path | None = None,
    name: str = "router",
    metadata: dict | None = None,
    progress: bool = False,
) -> TrainedRouter:
    """Trains a PPO router on episodes built by ``make_cluster`` (one episode seed each).

    With ``out_dir``, writes ``<name>.pt`` after every update (so an interrupted run keeps its
    latest policy), ``<name>-curves.json`` and the plot ``<name>-curves.png``.
    """
    env = SlimRoutingEnv(make_cluster, encoder, weights, mean_top1)
    seed_everything(ppo.seed)  # the initial weights too, so a run is reproducible per seed
    policy = new_policy(encoder, ppo.hidden_sizes)
    checkpoint = out_dir / f"{name}.pt" if out_dir is not None else None
    meta = {"reward": weights.model_dump(), **(metadata or {})}

    def on_update(_update: int, _stats: dict[str, float], agent: object) -> None:
        if checkpoint is not None:
            save_router(checkpoint, policy, encoder, ppo.hidden_sizes, meta)

    result = train(ppo, env, policy, progress=progress, on_update=on_update)
    if out_dir is not None:
        (out_dir / f"{name}-curves.json").write_text(json.dumps(result.history, indent=1))
        plot_training_curves(result.history, out_dir / f"{name}-curves.png", title=name)
    return TrainedRouter(policy, encoder, result.history, checkpoint)


def plot_training_curves(history: list[dict[str, float]], path: Path, title: str = "") -> None:
    """Mean one-step return, entropy and losses per update (Agg backend, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [h["global_step"] for h in history]
    keys = [
        ("charts/mean_return", "mean return (eq. 7 reward)"),
        ("losses/entropy", "entropy (eq. 12)"),
        ("losses/value_loss", "value loss (eq. 11)"),
        ("charts/epsilon", "ε (eq. 5)"),
    ]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3))
    for axis, (key, label) in zip(axes, keys, strict=True):
        axis.plot(steps, [h.get(key, float("nan")) for h in history])
        axis.set_xlabel("decisions")
        axis.set_title(label, fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
