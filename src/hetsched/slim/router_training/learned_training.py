"""Training the learned router: behaviour cloning of the rules, DAgger, optional PPO fine-tuning.

Beyond the paper's pure PPO (issue 19: give the learner every fair advantage a practitioner
would), in five steps:

1. **Teachers' references.** Every advisor rule runs on the validation episodes (the training
   scenarios as named, seeds no training episode uses); their scores are the bar.
2. **Behaviour cloning** (:mod:`~hetsched.slim.router_training.behaviour_cloning`) of each
   demonstration episode's best rule (default) or of one rule, over the randomised training mix
   (:mod:`~hetsched.slim.router_training.scenario_mix`), with the extended observation and the
   advisor-choice head (default, :class:`~hetsched.slim.routers.slo_features.AdviceEncoder`) or
   the masked joint placement head (:class:`~hetsched.slim.routers.slo_features.SloEncoder`).
3. **DAgger** (default three rounds): the greedy policy drives fresh episodes, the teachers label
   the states it reaches, and it is cloned again on every demonstration so far.
4. **PPO fine-tuning** (off by default; :func:`hetsched.rl.train`, Slim eqs. 8-13: one-step
   returns or GAE, clipped surrogate, K epochs, ε-mixed exploration on the first head) on the SLO
   reward (eq. 7 + ζ m_t, :mod:`hetsched.slim.routers.reward`), in chunks of a few updates. Each
   chunk has its own seed and a fresh optimiser, so a run resumed from the state saved after a
   chunk continues exactly as the uninterrupted run would.
5. **Selection.** After cloning, every DAgger round and every chunk the greedy policy is scored
   on the validation episodes; ``learned.pt`` is always the best policy so far by
   :func:`~hetsched.slim.router_training.validation.selection_score` (the mean score, less what
   it falls short of the best rule's SLO attainment on any scenario), so later steps can improve
   on the clone but never leave the router worse than it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, model_validator
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hetsched.core.config import StrictModel
from hetsched.core.errors import ConfigError, DataError
from hetsched.core.seeding import seed_everything
from hetsched.rl import FactoredActorCritic, PPOConfig, train
from hetsched.slim.router_training.behaviour_cloning import (
    ClusterFactory,
    clone,
    collect_demonstrations,
)
from hetsched.slim.router_training.curves import write_curves
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.scenario_mix import ScenarioMix, mix_encoder, training_mix
from hetsched.slim.router_training.validation import (
    ATTAINMENT_TARGET,
    ATTAINMENT_TOLERANCE,
    EpisodeScore,
    TeacherChoice,
    TeacherPick,
    episode_score,
    mean_score,
    scenario_scores,
    selection_score,
)
from hetsched.slim.routers.base import Router
from hetsched.slim.routers.ppo import PPORouter, new_policy, save_router
from hetsched.slim.routers.reward import reward_weights
from hetsched.slim.routers.slo_features import DEFAULT_ADVISORS
from hetsched.slim.routers.specs import create_router, parse_router_spec
from hetsched.slim.sim.future_arrivals import FutureSampler
from hetsched.slim.sim.scenario import build_cluster, mean_top1

STATE_FILE = "train-state.pt"
"""The resumable training state in the output folder."""
ROUTER_FILE = "learned.pt"
"""The best router so far (a :class:`~hetsched.slim.routers.ppo.PPORouter` checkpoint)."""


class LearnedRouterConfig(StrictModel, use_attribute_docstrings=True):
    """What ``hetsched slim train-router`` trains; defaults are the budget the results use."""

    scenarios: tuple[str, ...] = ()
    """Training scenarios by name or YAML path (empty: every shipped one not held out)."""
    images: int = Field(3000, ge=1)
    """Images per training and demonstration episode (3,000: long enough for an overloaded
    rule's queues to show, so the per-episode teacher is not a rule that only looks safe)."""
    randomize: bool = True
    """Perturb training episodes (load, burstiness, link, server speed)."""
    exact_width: bool | None = None
    """Run every training and validation episode with exact widths (True) or the paper's
    FINDFREEBESTFIT (False); None: as each scenario's file says."""
    accuracy_table: str | None = None
    """``paper`` or the path of a measured accuracy table (``hetsched slim accuracy``) for every
    training and validation episode: the model the router will serve (None: as each scenario's
    file says)."""
    advisors: tuple[str, ...] = DEFAULT_ADVISORS
    """Rules seen as features."""
    action: Literal["placement", "advice"] = "advice"
    """Action head: ``placement`` (the joint server-width placement and the group size) or
    ``advice`` (which advisor rule to follow at each decision)."""
    teacher: str = "per-episode"
    """Rule to clone: ``best`` (the advisor with the best validation score), ``per-episode``
    (each demonstration episode's best advisor), ``rollout`` (per chunk of decisions, the
    advisor whose rollout to the episode's end scores best:
    :class:`~hetsched.slim.router_training.teachers.RolloutTeacher`) or a rule name."""
    rollout_chunk: int = Field(400, ge=1)
    """Decisions per chunk of the ``rollout`` teacher."""
    rollout_horizon: int | None = Field(1200, ge=1)
    """Decisions per rollout of the ``rollout`` teacher, scored on the images whose fate they
    settle (None: to the end of the episode, several times slower)."""
    rollout_futures: Literal["workload", "sampled"] = "workload"
    """What the ``rollout`` teacher's copies see ahead: the episode's own arrivals
    (clairvoyant) or futures drawn from its scenario's process given only the present
    (:class:`~hetsched.slim.sim.future_arrivals.FutureSampler`)."""
    rollout_samples: int = Field(4, ge=1)
    """Drawn futures per candidate and chunk with ``rollout_futures="sampled"``."""
    teacher_choice: TeacherChoice = "attainment-target"
    """With several candidate teachers, how each episode's is picked: ``attainment-target``
    (the most accurate rule among those within half a point of the episode's best attainment,
    counting every rule that meets 99 % of the deadlines: an SLO target, then accuracy),
    ``score`` (attainment + half the accuracy) or ``attainment-first`` (without the 99 %
    target). ``attainment-target`` replaced ``score`` as the default when it raised accuracy at
    the same deadlines on bursty-3x over three training seeds (benchmarks/RESULTS.md, "exact-width
    execution, and the bursty bar")."""
    teacher_tolerance: float = Field(ATTAINMENT_TOLERANCE, ge=0, le=1)
    """With ``attainment-first``/``attainment-target``: attainment below the episode's best
    that still counts as meeting it (0.005: half a point)."""
    teacher_target: float = Field(ATTAINMENT_TARGET, ge=0, le=1)
    """With ``attainment-target``: the share of deadlines that counts as meeting the SLO."""
    preset: str = "slo"
    """Reward preset (``slo``: eq. 7 + the SLO term; ``efficiency``/``balanced``: eq. 7 exact)."""
    demo_episodes: int = Field(36, ge=1)
    """Demonstration episodes for behaviour cloning."""
    dagger_rounds: int = Field(3, ge=0)
    """Rounds of DAgger after cloning: the greedy policy drives ``demo_episodes`` fresh
    episodes, the teachers label every state it visits, and the policy is cloned again on all
    demonstrations so far (each round validated and kept if it scores best)."""
    bc_epochs: int = Field(15, ge=1)
    bc_learning_rate: float = Field(3e-3, gt=0)
    ppo_steps: int = Field(0, ge=0)
    """PPO fine-tuning decisions after cloning and DAgger (0: none; with the advice head it was
    unstable on every run tried, see docs/slim/learned-router.md)."""
    rollout: int = Field(1024, ge=8)
    """Decisions per PPO update."""
    chunk_updates: int = Field(8, ge=1)
    """PPO updates between validations (and resumable checkpoints)."""
    advantage: Literal["one_step", "gae"] = "one_step"
    """PPO's advantage: ``one_step`` (Slim eq. 8: each decision's own credited reward) or
    ``gae`` (generalised advantage estimation over the decision sequence, so a wide width that
    makes later images miss their deadlines is charged for it; beyond the paper)."""
    gamma: float = Field(0.99, ge=0, le=1)
    """Discount per decision with ``advantage="gae"`` (0.99: a horizon of ~100 decisions)."""
    ppo_learning_rate: float = Field(3e-4, gt=0)
    """Adam's learning rate while fine-tuning."""
    epsilon: float = Field(0.1, ge=0, le=1)
    """ε of eq. (5) on the placement head in the first chunk, decaying linearly to 0 by the
    last: a cloned policy is nearly deterministic and would otherwise never try what its rule
    does not."""
    entropy_coef: float = Field(0.003, ge=0)
    """c_H of eq. (13) while fine-tuning."""
    hidden_sizes: tuple[int, ...] = (128, 128)
    validation_episodes: int = Field(2, ge=1)
    """Validation episodes per training scenario."""
    validation_images: int | None = Field(None, ge=1)
    """Images per validation episode (None: each scenario's own length, scored on its
    steady-state window like the evaluation)."""
    seed: int = 0

    @model_validator(mode="after")
    def _horizon_covers_a_chunk(self) -> LearnedRouterConfig:
        """A rollout shorter than its chunk would label decisions it never looked at."""
        if self.rollout_horizon is not None and self.rollout_horizon < self.rollout_chunk:
            raise ValueError(
                f"rollout_horizon ({self.rollout_horizon}) must be at least rollout_chunk"
                f" ({self.rollout_chunk})"
            )
        if self.rollout_futures == "sampled" and self.teacher != "rollout":
            raise ValueError(
                "rollout_futures: sampled futures apply to teacher rollout only, got teacher"
                f" {self.teacher!r} (a run would silently train without them)"
            )
        return self


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
) -> dict[str, EpisodeScore]:
    """Per scenario, the mean score of the router ``router_for(seed)`` builds over its
    validation episodes (each on its steady-state window)."""
    return scenario_scores(
        [
            (
                name,
                episode_score(
                    build_cluster(scenario, seed), router_for(seed), scenario.warmup_fraction
                ),
            )
            for name, scenario, seed in episodes
        ]
    )


@dataclass
class TrainingState:
    """What a resumed run needs (saved after cloning and after every PPO chunk)."""

    history: list[dict[str, Any]]
    references: dict[str, dict[str, float]]
    """Each advisor's mean validation score (as plain fields)."""
    teachers: dict[str, int]
    best_attainment: dict[str, float]
    """Per validation scenario, the best advisor's SLO attainment (the selection's bar)."""
    best_score: float
    """The best selection score so far (the saved router's)."""
    chunks: int = 0
    """PPO chunks done (each has its own seed)."""
    decisions: int = 0
    """PPO decisions done."""


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

    A resumed run continues with the next chunk; it is the uninterrupted run exactly when the
    interrupted one stopped at a chunk boundary (``chunk_updates x rollout`` decisions).

    Raises:
        DataError: ``resume`` without a state file, or a state from other settings.
    """
    console = console or Console()
    mix = training_mix(
        config.scenarios,
        config.images,
        config.randomize,
        config.exact_width,
        config.accuracy_table,
    )
    encoder = mix_encoder(mix, config.advisors, config.action)
    if config.teacher not in ("best", "per-episode", "rollout"):
        parse_router_spec(config.teacher)  # an unknown name or bad setting fails here
        if config.action == "advice" and config.teacher not in config.advisors:
            raise ConfigError(
                f"teacher: with action advice, one of the advisors, not {config.teacher!r}"
            )
    episodes = mix.validation_episodes(config.validation_episodes, config.validation_images)
    weights = reward_weights(config.preset)
    top1 = mean_top1(next(iter(mix.scenarios.values())))
    out_dir.mkdir(parents=True, exist_ok=True)
    router_path, state_path = out_dir / ROUTER_FILE, out_dir / STATE_FILE
    metadata = {"config": config.model_dump(mode="json"), "reward": weights.model_dump()}

    def make_env(make_cluster: ClusterFactory) -> SlimRoutingEnv:
        return SlimRoutingEnv(make_cluster, encoder, weights, top1)

    def greedy(seed: int) -> Router:
        return PPORouter(policy=policy, encoder=encoder, seed=seed, greedy=True)

    seed_everything(config.seed)
    policy = new_policy(encoder, config.hidden_sizes)
    if resume:
        state = _load_state(state_path, config, policy)
    else:
        advisor_scores = {
            name: validate(partial(_registered, name), episodes) for name in config.advisors
        }
        references = {
            name: asdict(mean_score(list(scores.values())))
            for name, scores in advisor_scores.items()
        }
        best_attainment = {
            scenario: max(scores[scenario].slo_attainment for scores in advisor_scores.values())
            for scenario in mix.names
        }
        for name, fields in references.items():
            console.print(f"advisor {name}: validation {EpisodeScore(**fields)}", highlight=False)
        demos = collect_demonstrations(
            make_env,
            mix.cluster,
            _teachers(config, references),
            [config.seed * 100_000 + k for k in range(config.demo_episodes)],
            episode_score,
            choice=_teacher_pick(config),
            progress=progress,
            rollout_chunk=_rollout_chunk(config),
            rollout_horizon=config.rollout_horizon,
            futures=_futures(config, mix),
            rollout_samples=config.rollout_samples,
        )
        fit = clone(policy, demos, epochs=config.bc_epochs,
                    learning_rate=config.bc_learning_rate, seed=config.seed)  # fmt: skip
        cloned_scores = validate(greedy, episodes)
        cloned = mean_score(list(cloned_scores.values()))
        selection = selection_score(cloned_scores, best_attainment)
        console.print(
            f"cloned {len(demos)} decisions of teachers {demos.teachers} ({demos.masked_out}"
            f" masked out): agreement {fit[-1]['agreement']:.3f}; validation {cloned}",
            highlight=False,
        )
        history = [_row("bc", 0, cloned, selection=selection, agreement=fit[-1]["agreement"])]
        state = TrainingState(history, references, demos.teachers, best_attainment, selection)
        save_router(router_path, policy, encoder, config.hidden_sizes, metadata)
        for round_number in range(1, config.dagger_rounds + 1):
            first_seed = config.seed * 100_000 + round_number * config.demo_episodes
            collect_demonstrations(
                make_env,
                mix.cluster,
                _teachers(config, references),
                list(range(first_seed, first_seed + config.demo_episodes)),
                episode_score,
                choice=_teacher_pick(config),
                driver=greedy(first_seed),
                progress=progress,
                into=demos,
                rollout_chunk=_rollout_chunk(config),
                rollout_horizon=config.rollout_horizon,
                futures=_futures(config, mix),
                rollout_samples=config.rollout_samples,
            )
            fit = clone(
                policy,
                demos,
                epochs=config.bc_epochs,
                learning_rate=config.bc_learning_rate,
                seed=config.seed + round_number,
            )
            scores = validate(greedy, episodes)
            selection = selection_score(scores, best_attainment)
            console.print(
                f"DAgger round {round_number}: {len(demos)} decisions, agreement"
                f" {fit[-1]['agreement']:.3f}; validation {mean_score(list(scores.values()))}",
                highlight=False,
            )
            history.append(_row("dagger", 0, mean_score(list(scores.values())),
                                selection=selection, agreement=fit[-1]["agreement"]))  # fmt: skip
            if selection > state.best_score:
                state.best_score = selection
                save_router(router_path, policy, encoder, config.hidden_sizes, metadata)
        _save_state(state_path, policy, config, state)
    chunk_steps = config.chunk_updates * config.rollout
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not progress, transient=True) as bar:
        task = bar.add_task("PPO fine-tuning", total=config.ppo_steps, completed=state.decisions)
        while state.decisions < config.ppo_steps:
            steps = min(chunk_steps, config.ppo_steps - state.decisions)
            ppo = _chunk_config(config, state.chunks, steps, -(-config.ppo_steps // chunk_steps))
            result = train(ppo, make_env(mix.cluster), policy)
            scores = validate(greedy, episodes)
            selection = selection_score(scores, state.best_attainment)
            returns = [h["charts/mean_return"] for h in result.history]
            state.chunks, state.decisions = state.chunks + 1, state.decisions + steps
            state.history.append(_row("ppo", state.decisions, mean_score(list(scores.values())),
                                      selection=selection,
                                      mean_return=sum(returns) / max(1, len(returns))))  # fmt: skip
            if selection > state.best_score:
                state.best_score = selection
                save_router(router_path, policy, encoder, config.hidden_sizes, metadata)
            _save_state(state_path, policy, config, state)
            bar.update(task, advance=steps, description=f"PPO (best {state.best_score:.4f})")
    write_curves(state.history, state.references, out_dir / "learned-curves")
    best = max(state.history, key=lambda row: row["selection"])
    return LearnedRouterResult(
        router_path,
        state.history,
        {name: EpisodeScore(**fields) for name, fields in state.references.items()},
        EpisodeScore(best["slo_attainment"], best["accuracy"]),
        state.teachers,
    )


def learned_router_table(result: LearnedRouterResult) -> Table:
    """Validation of every advisor rule beside the learned router's best point."""
    table = Table(title="learned router vs the rules it saw (validation episodes)")
    for column in ("router", "SLO attainment", "accuracy", "score", "teacher on"):
        table.add_column(column, justify="left" if column == "router" else "right")
    rows = [*result.references.items(), ("learned", result.best)]
    for name, score in rows:
        taught = result.teachers.get(name)
        table.add_row(
            name,
            f"{100 * score.slo_attainment:.2f} %",
            f"{100 * score.accuracy:.2f} %",
            f"{score.score:.4f}",
            "" if taught is None else f"{taught} episodes",
        )
    return table


def _teachers(
    config: LearnedRouterConfig, references: dict[str, dict[str, float]]
) -> tuple[str, ...]:
    """The teacher (or per-episode candidates) that ``config.teacher`` names."""
    if config.teacher in ("per-episode", "rollout"):
        return config.advisors
    if config.teacher == "best":
        return (max(references, key=lambda name: EpisodeScore(**references[name]).score),)
    return (config.teacher,)


def _teacher_pick(config: LearnedRouterConfig) -> TeacherPick:
    """How each demonstration episode's (or rollout chunk's) teacher is picked."""
    return TeacherPick(config.teacher_choice, config.teacher_tolerance, config.teacher_target)


def _futures(
    config: LearnedRouterConfig, mix: ScenarioMix
) -> Callable[[int], FutureSampler] | None:
    """Episode seed -> its drawn-futures sampler, with ``rollout_futures="sampled"``."""
    if config.rollout_futures == "workload":
        return None
    return lambda seed: FutureSampler(mix.scenario(seed))


def _rollout_chunk(config: LearnedRouterConfig) -> int:
    """Decisions per rollout chunk, 0 unless the teacher is ``rollout``."""
    return config.rollout_chunk if config.teacher == "rollout" else 0


def _registered(spec: str, seed: int) -> Router:
    """A fresh router of ``spec`` (a registered name, perhaps with settings) seeded with
    ``seed``."""
    return create_router(spec, seed)


def _chunk_config(config: LearnedRouterConfig, chunk: int, steps: int, chunks: int) -> PPOConfig:
    """PPO settings of fine-tuning chunk ``chunk`` of ``chunks`` (its own seed; ε decays
    linearly over the chunks)."""
    rollout = min(config.rollout, steps)
    epsilon = config.epsilon * max(0.0, 1.0 - chunk / max(1, chunks))
    return PPOConfig(
        seed=config.seed * 1_000 + chunk,
        advantage=config.advantage,
        gamma=config.gamma,
        total_timesteps=steps,
        num_steps=rollout,
        num_minibatches=min(4, rollout),
        update_epochs=3,
        learning_rate=config.ppo_learning_rate,
        clip_coef=0.2,
        vf_coef=0.5,
        ent_coef=config.entropy_coef,
        max_grad_norm=0.5,
        epsilon_max=epsilon,
        epsilon_min=epsilon,
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
    path: Path, policy: FactoredActorCritic, config: LearnedRouterConfig, state: TrainingState
) -> None:
    """The policy's state dict, the settings and the plain fields of ``state`` (loadable with
    ``weights_only=True``)."""
    torch.save(
        {"policy": policy.state_dict(), "config": config.model_dump(mode="json"), **asdict(state)},
        path,
    )


def _load_state(
    path: Path, config: LearnedRouterConfig, policy: FactoredActorCritic
) -> TrainingState:
    """Reads what :func:`_save_state` wrote into ``policy`` and a :class:`TrainingState`.

    Raises:
        DataError: A missing or foreign file, or one saved with other settings (only
            ``ppo_steps`` may grow).
    """
    if not path.is_file():
        raise DataError("no training state to resume (run without --resume first)", path=str(path))
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise DataError(
            f"not a training state (unreadable: {type(error).__name__})", path=str(path)
        ) from None
    try:
        policy.load_state_dict(saved.pop("policy"))
        settings = saved.pop("config")
        state = TrainingState(**saved)
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as error:
        raise DataError(
            f"not a training state of this version (retrain without --resume): {error}",
            path=str(path),
        ) from None
    changed = sorted(
        key
        for key, value in config.model_dump(mode="json").items()
        if key != "ppo_steps" and settings.get(key) != value
    )
    if changed:
        raise DataError(
            f"resume with the same settings; changed: {', '.join(changed)}", path=str(path)
        )
    return state
