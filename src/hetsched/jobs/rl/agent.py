"""The queue-scoring actor-critic of RLTune (Fig. 9) and RLScheduler (its "kernel"), and the
checkpoints of every jobs agent (SchedInspector's included, :mod:`.inspector_agent`).

The actor is one small MLP applied to every queue slot with shared weights (RLTune's "sliding
window", RLScheduler's kernel), so the priority of a job depends on its own features and the
network is the same size for any ``max_queue``. Padded slots and jobs that cannot start now are
masked out of the softmax (``hetsched.rl.MaskedCategorical``). The critic is an MLP over the
flattened critic vector of the whole window that returns one value. Which observation the agent
reads (RLTune's 8 sampled Table 3 features or RLScheduler's 4) is its feature set
(:mod:`.feature_sets`).

Checkpoints are plain ``torch.save`` dictionaries of tensors, numbers and strings (the agent kind,
its architecture, its weights, the training metadata), read back with
``torch.load(weights_only=True)`` so loading a file never runs code from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hetsched.core.errors import DataError
from hetsched.jobs.rl.feature_sets import get_feature_set
from hetsched.jobs.rl.features import QueueFeatures
from hetsched.jobs.rl.inspector_agent import InspectorAgent
from hetsched.jobs.rl.mlp import tanh_mlp
from hetsched.rl import ActionAndValue, MaskedCategorical

CHECKPOINT_FORMAT = "hetsched-jobs-agent-v2"


class JobScoringAgent(nn.Module):
    """Per-job shared scoring actor + window critic (an :class:`hetsched.rl.ActorCritic`).

    Args:
        max_queue: Queue slots in an observation (default: the feature set's window).
        actor_hidden: Hidden widths of the shared scorer (default: the feature set's).
        critic_hidden: Hidden widths of the critic (default: the feature set's).
        feature_set: ``rltune`` (RLTune's agent) or ``rlscheduler`` (RLScheduler's kernel).
    """

    def __init__(
        self,
        max_queue: int | None = None,
        actor_hidden: tuple[int, ...] | None = None,
        critic_hidden: tuple[int, ...] | None = None,
        feature_set: str = "rltune",
    ) -> None:
        super().__init__()
        features = get_feature_set(feature_set)
        self.feature_set = feature_set
        self.max_queue = features.max_queue if max_queue is None else max_queue
        if self.max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {self.max_queue}")
        self.actor_hidden = tuple(actor_hidden or features.actor_hidden)
        self.critic_hidden = tuple(critic_hidden or features.critic_hidden)
        self.job_features = features.job_features
        self.critic_features = features.critic_features
        self.actor = tanh_mlp((self.job_features, *self.actor_hidden, 1), 0.01)
        self.critic = tanh_mlp((self.max_queue * self.critic_features, *self.critic_hidden, 1), 1.0)

    @property
    def kind(self) -> str:
        """The agent's name in checkpoints and ``--agent``: its feature set."""
        return self.feature_set

    def architecture(self) -> dict[str, Any]:
        """What rebuilds the network before its weights are loaded."""
        return {
            "max_queue": self.max_queue,
            "actor_hidden": list(self.actor_hidden),
            "critic_hidden": list(self.critic_hidden),
        }

    @property
    def obs_dim(self) -> int:
        """Length of a flat observation: OV (max_queue x job features) then CV."""
        return self.max_queue * (self.job_features + self.critic_features)

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat ``(batch, obs_dim)`` observations -> OV ``(batch, Q, F)``, CV ``(batch, Q*C)``."""
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(
                f"observation has {obs.shape[-1]} values, agent expects {self.obs_dim}"
            )
        cut = self.max_queue * self.job_features
        ov = obs[..., :cut].reshape(-1, self.max_queue, self.job_features)
        return ov, obs[..., cut:].reshape(-1, self.max_queue * self.critic_features)

    def logits(self, ov: torch.Tensor) -> torch.Tensor:
        """Priority logit per slot, ``(batch, Q)``: the shared actor applied to every job."""
        return self.actor(ov).squeeze(-1)

    def get_action_and_value(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor | None = None,
        action: torch.Tensor | None = None,
        epsilon: torch.Tensor | float | None = None,
    ) -> ActionAndValue:
        """Samples (or evaluates) the slot of the job to start next; see ``hetsched.rl``."""
        ov, cv = self.split(obs)
        dist = MaskedCategorical(self.logits(ov), mask, epsilon)  # softmax over valid jobs
        if action is None:
            action = dist.sample()
        action = action.reshape(-1)
        value = self.critic(cv).squeeze(-1)
        return ActionAndValue(action, dist.log_prob(action), dist.entropy(), value)

    def priorities(self, features: QueueFeatures) -> np.ndarray:
        """Greedy priority (logit) of each visible job, higher first."""
        with torch.no_grad():
            ov = torch.from_numpy(features.observation[: len(features.queue)]).unsqueeze(0)
            return self.logits(ov).squeeze(0).numpy()


JobsAgent = JobScoringAgent | InspectorAgent
"""Any agent ``hetsched jobs train`` writes."""


def save_checkpoint(path: str | Path, agent: JobsAgent, meta: dict[str, Any]) -> None:
    """Writes the agent's kind, architecture and weights and ``meta`` (numbers and strings)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "kind": agent.kind,
            "architecture": agent.architecture(),
            "state_dict": agent.state_dict(),
            "meta": meta,
        },
        path,
    )


def _build(kind: str, architecture: dict[str, Any]) -> JobsAgent:
    if kind == InspectorAgent.KIND:
        return InspectorAgent(
            int(architecture["max_queue"]),
            tuple(architecture["hidden"]),
            int(architecture["max_rejections"]),
        )
    return JobScoringAgent(
        int(architecture["max_queue"]),
        tuple(architecture["actor_hidden"]),
        tuple(architecture["critic_hidden"]),
        kind,
    )


def load_checkpoint(path: str | Path) -> tuple[JobsAgent, dict[str, Any]]:
    """Reads a checkpoint written by :func:`save_checkpoint`.

    Raises:
        DataError: If the file is missing, not a torch file, or not a jobs agent checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("checkpoint not found", path=str(path))
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise DataError(
            f"not a readable checkpoint ({type(error).__name__})", path=str(path)
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise DataError(
            f"not a hetsched jobs agent checkpoint (expected {CHECKPOINT_FORMAT})", path=str(path)
        )
    try:
        agent = _build(str(payload["kind"]), dict(payload["architecture"]))
        agent.load_state_dict(payload["state_dict"])
    except (KeyError, ValueError, RuntimeError) as error:
        raise DataError(f"weights do not match the architecture: {error}", path=str(path)) from None
    agent.eval()
    return agent, dict(payload.get("meta", {}))
