"""Training the learned router: behaviour cloning from the best rule, then PPO fine-tuning.

Beyond the paper's pure PPO (issue 19: give the learner every fair advantage a practitioner
would), in four steps:

1. **Teachers' references.** Every advisor rule runs on the validation episodes (the training
   scenarios as named, seeds no training episode uses); their scores are the bar.
2. **Behaviour cloning** (:mod:`~hetsched.slim.router_training.behaviour_cloning`) on the best
   rule of each demonstration episode, over the randomised training mix
   (:mod:`~hetsched.slim.router_training.scenario_mix`), with the extended observation and the
   masked joint placement head (:class:`~hetsched.slim.routers.slo_features.SloEncoder`).
3. **PPO fine-tuning** (:func:`hetsched.rl.train`, Slim eqs. 8-13: one-step returns, clipped
   surrogate, K epochs) on the SLO reward (eq. 7 + ζ m_t, :mod:`hetsched.slim.routers.reward`), in
   chunks of a few updates. Each chunk has its own seed and a fresh optimiser, so a run resumed
   from the state saved after a chunk continues exactly as the uninterrupted run would.
4. **Selection.** After cloning and after every chunk the greedy policy is scored on the
   validation episodes; ``learned.pt`` is always the best policy so far, so fine-tuning can
   improve on the cloned rule but never leave the router worse than it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from hetsched.core.config import StrictModel
from hetsched.core.errors import DataError
from hetsched.core.seeding import seed_everything
from hetsched.rl import FactoredActorCritic, PPOConfig, train
from hetsched.slim.router_training.behaviour_cloning import clone, collect_demonstrations
from hetsched.slim.router_training.curves import write_curves
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.scenario_mix import mix_encoder, training_mix
from hetsched.slim.router_training.validation import (
    EpisodeScore,
    episode_score,
    mean_score,
)
from hetsched.slim.routers.base import ROUTERS, Router
from hetsched.slim.routers.ppo import PPORouter, new_policy, save_router
from hetsched.slim.routers.reward import reward_weights
from hetsched.slim.routers.slo_features import DEFAULT_ADVISORS
from hetsched.slim.sim.scenario import build_cluster, mean_top1

STATE_FILE = "train-state.pt"
"""The resumable training state in the output folder."""
ROUTER_FILE = "learned.pt"
"""The best router so far (a :class:`~hetsched.slim.routers.ppo.PPORouter` checkpoint)."""


class LearnedRouterConfig(StrictModel, use_attribute_docstrings=True):
    """What ``hetsched slim train-router`` trains; defaults are the budget the results use."""

    scenarios: tuple[str, ...] = ()
    """Training scenarios by name or YAML path (empty: every shipped one not held out)."""
    images: int = Field(1000, ge=1)
    """Images per training, demonstration and validation episode."""
    randomize: bool = True
    """Perturb training episodes (load, burstiness, link, server speed)."""
    advisors: tuple[str, ...] = DEFAULT_ADVISORS
    """Rules seen as features and the candidate teachers."""
    preset: str = "slo"
    """Reward preset (``slo``: eq. 7 + the SLO term; ``efficiency``/``balanced``: eq. 7 exact)."""
    demo_episodes: int = Field(36, ge=1)
    """Demonstration episodes for behaviour cloning."""
    bc_epochs: int = Field(15, ge=1)
    bc_learning_rate: float = Field(3e-3, gt=0)
    ppo_steps: int = Field(120_000, ge=0)
    """Fine-tuning decisions (0: cloning only)."""
    rollout: int = Field(1024, ge=8)
    """Decisions per PPO update."""
    chunk_updates: int = Field(8, ge=1)
    """PPO updates between validations (and resumable checkpoints)."""
    ppo_learning_rate: float = Field(1e-4, gt=0)
    """Small: fine-tuning must not wash out the cloned rule in one update."""
    hidden_sizes: tuple[int, ...] = (128, 128)
    validation_episodes: int = Field(2, ge=1)
    """Validation episodes per training scenario."""
    seed: int = 0


@dataclass
class LearnedRouterResult:
    """What a training run produced."""

    checkpoint: Path
    history: list[dict[str, Any]]
    references: dict[str, EpisodeScore]
    """Each advisor's mean validation score."""
    best: EpisodeScore
    teachers: dict[str, int] = field(default_factory=dict)


def validate(
    router_for: Callable[[int], Router], episodes: list[tuple[str, Any, int]]
) -> EpisodeScore:
    """Mean score of the router ``router_for(seed)`` builds over the validation episodes."""
    return mean_score(
        [
            episode_score(build_cluster(scenario, seed), router_for(seed))
            for _, scenario, seed in episodes
        ]
    )


def train_learned_router(
    config: LearnedRouterConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    console: Console | None = None,
    progress: bool = True,
) -> LearnedRouterResult:
    """Runs the four steps of the module docstring; writes ``learned.pt``, the resumable state
    and the learning curves (CSV and PNG) under ``out_dir``.

    Raises:
        DataError: ``resume`` without a state file, or a state from another configuration.
    """
    console = console or Console()
    mix = training_mix(config.scenarios, config.images, config.randomize)
    encoder = mix_encoder(mix, config.advisors)
    episodes = mix.validation_episodes(config.validation_episodes)
    weights = reward_weights(config.preset)
    top1 = mean_top1(next(iter(mix.scenarios.values())))
    out_dir.mkdir(parents=True, exist_ok=True)
    router_path, state_path = out_dir / ROUTER_FILE, out_dir / STATE_FILE

    def make_env(make_cluster: Any) -> SlimRoutingEnv:
        return SlimRoutingEnv(make_cluster, encoder, weights, top1)

    def greedy(policy: FactoredActorCritic) -> Callable[[int], Router]:
        return lambda seed: PPORouter(policy=policy, encoder=encoder, seed=seed, greedy=True)

    metadata = {"config": config.model_dump(mode="json"), "reward": weights.model_dump()}
    seed_everything(config.seed)
    policy = new_policy(encoder, config.hidden_sizes)
    if resume:
        state = _load_state(state_path, config)
        policy.load_state_dict(state["policy"])
        history, references = state["history"], state["references"]
        best_score, first_chunk, teachers = state["best_score"], state["chunk"], state["teachers"]
    else:
        references = {
            name: asdict(validate(partial(_registered, name), episodes)) for name in config.advisors
        }
        for name, score in references.items():
            console.print(f"advisor {name}: validation {EpisodeScore(**score)}", highlight=False)
        demos = collect_demonstrations(
            make_env,
            mix.cluster,
            config.advisors,
            [config.seed * 100_000 + k for k in range(config.demo_episodes)],
            lambda cluster, router: episode_score(cluster, router).score,
            progress=progress,
        )
        teachers = demos.teachers
        fit = clone(policy, demos, epochs=config.bc_epochs,
                    learning_rate=config.bc_learning_rate, seed=config.seed)  # fmt: skip
        cloned = validate(greedy(policy), episodes)
        console.print(
            f"cloned {len(demos)} decisions of teachers {teachers} ({demos.masked_out} masked"
            f" out): agreement {fit[-1]['agreement']:.3f}; validation {cloned}",
            highlight=False,
        )
        history = [_row("bc", 0, cloned, agreement=fit[-1]["agreement"])]
        best_score, first_chunk = cloned.score, 0
        save_router(router_path, policy, encoder, config.hidden_sizes, metadata)
        _save_state(state_path, policy, config, history, references, best_score, 0, teachers)
    chunk_steps = config.chunk_updates * config.rollout
    chunks = -(-config.ppo_steps // chunk_steps)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not progress, transient=True) as bar:
        task = bar.add_task("PPO fine-tuning", total=chunks, completed=first_chunk)
        for chunk in range(first_chunk, chunks):
            ppo = _chunk_config(
                config, chunk, min(chunk_steps, config.ppo_steps - chunk * chunk_steps)
            )
            result = train(ppo, make_env(mix.cluster), policy)
            policy.eval()
            score = validate(greedy(policy), episodes)
            returns = [h["charts/mean_return"] for h in result.history]
            history.append(_row("ppo", (chunk + 1) * chunk_steps, score,
                                mean_return=sum(returns) / max(1, len(returns))))  # fmt: skip
            if score.score > best_score:
                best_score = score.score
                save_router(router_path, policy, encoder, config.hidden_sizes, metadata)
            _save_state(
                state_path, policy, config, history, references, best_score, chunk + 1, teachers
            )
            bar.update(task, advance=1, description=f"PPO fine-tuning (best {best_score:.4f})")
    write_curves(history, references, out_dir / "learned-curves")
    best = max(history, key=lambda row: row["score"])
    return LearnedRouterResult(
        router_path,
        history,
        {name: EpisodeScore(**score) for name, score in references.items()},
        EpisodeScore(best["slo_attainment"], best["accuracy"]),
        teachers,
    )


def _registered(name: str, seed: int) -> Router:
    """A fresh registered router ``name`` seeded with ``seed``."""
    router: Router = ROUTERS.create(name, seed=seed)
    return router


def _chunk_config(config: LearnedRouterConfig, chunk: int, steps: int) -> PPOConfig:
    """PPO settings of one fine-tuning chunk (its own seed; no ε-mixing: the cloned policy
    explores by sampling its own distribution)."""
    rollout = min(config.rollout, steps)
    return PPOConfig(
        seed=config.seed * 1_000 + chunk,
        advantage="one_step",
        total_timesteps=steps,
        num_steps=rollout,
        num_minibatches=min(4, rollout),
        update_epochs=3,
        learning_rate=config.ppo_learning_rate,
        clip_coef=0.2,
        vf_coef=0.5,
        ent_coef=0.0,
        max_grad_norm=0.5,
        hidden_sizes=config.hidden_sizes,
    )


def _row(phase: str, decisions: int, score: EpisodeScore, **extra: float) -> dict[str, Any]:
    return {
        "phase": phase,
        "decisions": decisions,
        "score": score.score,
        "slo_attainment": score.slo_attainment,
        "accuracy": score.accuracy,
        **extra,
    }


def _save_state(
    path: Path,
    policy: FactoredActorCritic,
    config: LearnedRouterConfig,
    history: list[dict[str, Any]],
    references: dict[str, dict[str, float]],
    best_score: float,
    chunk: int,
    teachers: dict[str, int],
) -> None:
    torch.save(
        {
            "policy": policy.state_dict(),
            "config": config.model_dump(mode="json"),
            "history": history,
            "references": references,
            "best_score": best_score,
            "chunk": chunk,
            "teachers": teachers,
        },
        path,
    )


def _load_state(path: Path, config: LearnedRouterConfig) -> dict[str, Any]:
    if not path.is_file():
        raise DataError("no training state to resume (run without --resume first)", path=str(path))
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
        saved = state["config"]
    except (KeyError, RuntimeError, TypeError, ValueError) as error:
        raise DataError(f"not a training state: {error}", path=str(path)) from None
    changed = sorted(k for k, v in config.model_dump(mode="json").items()
                     if k not in ("ppo_steps",) and saved.get(k) != v)  # fmt: skip
    if changed:
        raise DataError(
            f"resume with the same settings; changed: {', '.join(changed)}", path=str(path)
        )
    return state
