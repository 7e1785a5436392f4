"""What ``hetsched jobs train`` trains: the agents by name and the training settings.

Its own module because both the learner (:mod:`.training`) and every rollout worker
(:mod:`.rollouts`, in this process or a Ray actor) build their agent and episodes from it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from hetsched.core.config import StrictModel
from hetsched.core.errors import UnknownNameError
from hetsched.jobs.rl.inspector_features import MAX_REJECTIONS
from hetsched.rl import PPOConfig

#: ``--agent`` name -> its reward (:mod:`.episodes`).
AGENTS: dict[str, str] = {"rltune": "gap", "rlscheduler": "metric", "schedinspector": "gap"}


def check_agent(agent: str) -> str:
    """Returns ``agent`` if known.

    Raises:
        UnknownNameError: Naming the unknown agent and the known ones.
    """
    if agent not in AGENTS:
        raise UnknownNameError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    return agent


class TrainConfig(StrictModel, use_attribute_docstrings=True):
    """What ``hetsched jobs train`` trains; defaults follow the paper where it gives a value."""

    agent: str = "rltune"
    """``rltune`` (RLTune's prioritiser), ``rlscheduler`` (RLScheduler's kernel) or
    ``schedinspector`` (SchedInspector over the base policy)."""
    base_policy: str = "fcfs"
    """Policy the reward compares with (FIFO = ``fcfs``, ``sjf``, ``f1``, ``wfp3``, ...)."""
    metric: str = "wait"
    """``wait``, ``jct``, ``bsld`` or ``util``."""
    epochs: int = Field(10, ge=1)
    """Training epochs."""
    trajectories_per_epoch: int = Field(100, ge=1)
    """Trajectories (episodes) per epoch (paper: 100)."""
    trajectories_per_update: int = Field(4, ge=1)
    """Trajectories per PPO update."""
    episode_jobs: int = Field(256, ge=2)
    """Jobs per episode (paper: 256)."""
    max_queue: int | None = Field(None, ge=1)
    """Visible queue slots (None: the agent's paper's window, RLTune 256, RLScheduler 128)."""
    placer: str = "pack"
    """Placer of both pipelines: ``pack``, ``spread`` or ``milp``."""
    seed: int = Field(0, ge=0)
    """Seeds the initial weights, the PPO minibatches and every trajectory's episode starts and
    sampled actions (:func:`.rollouts.trajectory_seeds`)."""
    learning_rate: float = Field(1e-3, gt=0)
    """Adam learning rate (actor and critic)."""
    update_epochs: int = Field(4, ge=1)
    """PPO epochs over each batch."""
    num_minibatches: int = Field(4, ge=1)
    """Minibatches per PPO epoch."""
    gamma: float = Field(1.0, ge=0, le=1)
    """Discount: 1, the reward is one episode-level score."""
    gae_lambda: float = Field(1.0, ge=0, le=1)
    """GAE λ. 1 (Monte Carlo: every decision's advantage is the episode's reward minus V(s)) because
    the reward arrives only at the end: with λ = 0.97 and ~150 decisions per episode the reward
    reaches the early decisions with weight 0.97^150 ≈ 0.01 and they learn from the untrained
    critic's noise (on synthetic Philly that agent ended 49 % worse than FIFO, the λ = 1 one 27 %
    better)."""
    clip_coef: float = Field(0.2, gt=0)
    """PPO clip ε."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus weight."""
    vf_coef: float = Field(0.5, ge=0)
    """Value-loss weight."""
    actor_hidden: tuple[int, ...] | None = None
    """Hidden widths of the per-job scoring MLP (None: the agent's paper's)."""
    critic_hidden: tuple[int, ...] | None = None
    """Hidden widths of the critic MLP (None: the agent's paper's; the inspector's critic has its
    actor's widths)."""
    max_rejections: int = Field(MAX_REJECTIONS, ge=1)
    """SchedInspector: consecutive rejections after which the pick is accepted unasked."""

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, agent: str) -> str:
        return check_agent(agent)

    def ppo(self) -> PPOConfig:
        """The shared PPO's config for the update step."""
        return PPOConfig(
            seed=self.seed,
            num_steps=max(self.num_minibatches, 1),
            learning_rate=self.learning_rate,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            num_minibatches=self.num_minibatches,
            update_epochs=self.update_epochs,
            clip_coef=self.clip_coef,
            ent_coef=self.ent_coef,
            vf_coef=self.vf_coef,
        )
