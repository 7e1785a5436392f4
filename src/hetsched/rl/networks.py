"""The actor-critic side of PPO: what an agent must offer and the factored MLP we use.

Split from :mod:`hetsched.rl.ppo` so the update rule reads on its own; the network is the part
that changes per problem (Slim routes with three heads, RLTune scores queue slots).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from hetsched.rl.distributions import FactoredCategorical


class ActionAndValue(NamedTuple):
    """What an agent returns for a batch of observations."""

    action: torch.Tensor
    """Sampled (or given) actions, ``(batch, n_heads)`` or ``(batch,)``."""
    log_prob: torch.Tensor
    """Joint log-probability under the (ε-mixed) behaviour distribution, ``(batch,)``."""
    entropy: torch.Tensor
    """Entropy of the learned policy, ``(batch,)``."""
    value: torch.Tensor
    """State-value estimate V(s), ``(batch,)``."""


class ActorCritic(Protocol):
    """The one method PPO needs from an agent (CleanRL's ``get_action_and_value``).

    With ``action=None`` it samples; with an action it evaluates that action's log-probability
    (used in the update). ``mask`` rows mark valid actions; ``epsilon`` is the ε of the mixture.
    """

    def get_action_and_value(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor | None = None,
        action: torch.Tensor | None = None,
        epsilon: torch.Tensor | float | None = None,
    ) -> ActionAndValue: ...

    def parameters(self) -> Any: ...


def _layer(in_features: int, out_features: int, std: float) -> nn.Linear:
    """Orthogonal initialisation with zero bias, as CleanRL does (small std for output heads)."""
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


class FactoredActorCritic(nn.Module):
    """Shared MLP → logits of every categorical head and a scalar value (Slim eq. 3).

    Args:
        obs_dim: Length of the (flat, normalised) observation.
        head_sizes: Number of choices of each head, e.g. (servers, widths, groups).
        hidden_sizes: Widths of the shared tanh MLP.
        epsilon_heads: Heads whose distribution is ε-mixed when an ε is given.
    """

    def __init__(
        self,
        obs_dim: int,
        head_sizes: Sequence[int],
        hidden_sizes: Sequence[int] = (64, 64),
        epsilon_heads: Sequence[int] = (0,),
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.head_sizes = tuple(int(n) for n in head_sizes)
        self.epsilon_heads = tuple(epsilon_heads)
        layers: list[nn.Module] = []
        width = obs_dim
        for hidden in hidden_sizes:
            layers += [_layer(width, hidden, math.sqrt(2)), nn.Tanh()]
            width = hidden
        self.trunk = nn.Sequential(*layers)
        self.policy_head = _layer(width, sum(self.head_sizes), 0.01)
        self.value_head = _layer(width, 1, 1.0)
        self._numpy_layers: list[tuple[np.ndarray, np.ndarray] | None] | None = None

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Concatenated logits of all heads (no value): the cheap path for acting only."""
        return self.policy_head(self.trunk(obs))

    def logits_numpy(self, obs: np.ndarray) -> np.ndarray:
        """:meth:`logits` of one observation, computed in NumPy on the live parameters (CPU).

        A router decides one state at a time, where torch's per-call dispatch (~30 µs for this
        small MLP) costs more than the arithmetic; NumPy on views of the same weights does the
        same three products in a few µs. The views share the parameters' memory, so optimizer
        steps and ``load_state_dict`` (both in place) are seen at once.
        """
        if self._numpy_layers is None:
            self._numpy_layers = [
                (layer.weight.detach().numpy(), layer.bias.detach().numpy())
                if isinstance(layer, nn.Linear)
                else None  # the trunk is Linear/Tanh pairs (see __init__)
                for layer in (*self.trunk, self.policy_head)
            ]
        hidden = np.asarray(obs, dtype=np.float32)
        for layer in self._numpy_layers:
            hidden = np.tanh(hidden) if layer is None else layer[0] @ hidden + layer[1]
        return hidden

    def _apply(self, fn, *args, **kwargs):
        """Drops the NumPy views when ``.to()``/``.float()`` etc. replace the parameters."""
        self._numpy_layers = None
        return super()._apply(fn, *args, **kwargs)

    def distribution(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor | None = None,
        epsilon: torch.Tensor | float | None = None,
    ) -> tuple[FactoredCategorical, torch.Tensor]:
        """The factored action distribution (eq. 4, ε-mixed per eq. 5) and V(s)."""
        hidden = self.trunk(obs)
        dist = FactoredCategorical(
            self.policy_head(hidden), self.head_sizes, mask, epsilon, self.epsilon_heads
        )
        return dist, self.value_head(hidden).squeeze(-1)

    def get_action_and_value(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor | None = None,
        action: torch.Tensor | None = None,
        epsilon: torch.Tensor | float | None = None,
    ) -> ActionAndValue:
        """Samples (or evaluates) a factored action; see :class:`ActorCritic`."""
        dist, value = self.distribution(obs, mask, epsilon)
        if action is None:
            action = dist.sample()
        return ActionAndValue(action, dist.log_prob(action), dist.entropy(), value)
