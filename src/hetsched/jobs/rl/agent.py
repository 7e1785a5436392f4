"""RLTune's actor-critic (Fig. 9) and its checkpoints.

The actor is one small 3-layer MLP applied to every queue slot with shared weights (the paper's
"sliding window" over the jobs), so the priority of a job depends on its own 8 features and the
network is the same size for any ``max_queue``. Padded slots and jobs that cannot start now are
masked out of the softmax (``hetsched.rl.MaskedCategorical``). The critic is a 3-layer MLP over the
flattened critic vector of the whole queue (``max_queue x 5``) that returns one value.

Checkpoints are plain ``torch.save`` dictionaries of tensors and numbers, read back with
``torch.load(weights_only=True)`` so loading a file never runs code from it.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hetsched.core.errors import DataError
from hetsched.jobs.rl.features import CRITIC_FEATURES, MAX_QUEUE_SIZE, OBS_FEATURES, QueueFeatures
from hetsched.rl import ActionAndValue, MaskedCategorical

CHECKPOINT_FORMAT = "hetsched-rltune-agent-v1"


def _mlp(sizes: tuple[int, ...], out_std: float) -> nn.Sequential:
    """Tanh MLP with orthogonal initialisation (small output std, as CleanRL's heads)."""
    layers: list[nn.Module] = []
    for i, (width_in, width_out) in enumerate(pairwise(sizes)):
        layer = nn.Linear(width_in, width_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(layer.weight, out_std if last else np.sqrt(2))
        nn.init.zeros_(layer.bias)
        layers.append(layer)
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class JobScoringAgent(nn.Module):
    """Per-job shared scoring actor + queue critic (an :class:`hetsched.rl.ActorCritic`).

    Args:
        max_queue: Queue slots in an observation (MAX_QUEUE_SIZE).
        actor_hidden: Widths of the actor's two hidden layers.
        critic_hidden: Widths of the critic's two hidden layers.
    """

    def __init__(
        self,
        max_queue: int = MAX_QUEUE_SIZE,
        actor_hidden: tuple[int, int] = (32, 16),
        critic_hidden: tuple[int, int] = (64, 32),
    ) -> None:
        super().__init__()
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.max_queue = max_queue
        self.actor_hidden = tuple(actor_hidden)
        self.critic_hidden = tuple(critic_hidden)
        self.actor = _mlp((OBS_FEATURES, *self.actor_hidden, 1), 0.01)
        self.critic = _mlp((max_queue * CRITIC_FEATURES, *self.critic_hidden, 1), 1.0)

    @property
    def obs_dim(self) -> int:
        """Length of a flat observation: OV (max_queue x 8) then CV (max_queue x 5)."""
        return self.max_queue * (OBS_FEATURES + CRITIC_FEATURES)

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat ``(batch, obs_dim)`` observations -> OV ``(batch, Q, 8)``, CV ``(batch, Q*5)``."""
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(
                f"observation has {obs.shape[-1]} values, agent expects {self.obs_dim}"
            )
        cut = self.max_queue * OBS_FEATURES
        ov = obs[..., :cut].reshape(-1, self.max_queue, OBS_FEATURES)
        return ov, obs[..., cut:].reshape(-1, self.max_queue * CRITIC_FEATURES)

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


def save_checkpoint(path: str | Path, agent: JobScoringAgent, meta: dict[str, Any]) -> None:
    """Writes the weights, the architecture and ``meta`` (numbers and strings only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "max_queue": agent.max_queue,
            "actor_hidden": list(agent.actor_hidden),
            "critic_hidden": list(agent.critic_hidden),
            "state_dict": agent.state_dict(),
            "meta": meta,
        },
        path,
    )


def load_checkpoint(path: str | Path) -> tuple[JobScoringAgent, dict[str, Any]]:
    """Reads a checkpoint written by :func:`save_checkpoint`.

    Raises:
        DataError: If the file is missing, not a torch file, or not an RLTune agent checkpoint.
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
            f"not an RLTune agent checkpoint (expected {CHECKPOINT_FORMAT})", path=str(path)
        )
    agent = JobScoringAgent(
        int(payload["max_queue"]),
        tuple(payload["actor_hidden"]),
        tuple(payload["critic_hidden"]),
    )
    try:
        agent.load_state_dict(payload["state_dict"])
    except RuntimeError as error:
        raise DataError(f"weights do not match the architecture: {error}", path=str(path)) from None
    agent.eval()
    return agent, dict(payload.get("meta", {}))
