"""Categorical action distributions for PPO: masks, ε-mixtures and factored (multi-head) actions.

A plain ``torch.distributions.Categorical`` cannot express two things the schedulers need:

* **Masks.** Invalid actions (a padded queue slot, a server that is down) get probability zero.
  Their logits are replaced by a large negative number rather than ``-inf`` so that
  ``p * log p`` stays 0 instead of NaN in the entropy.
* **ε-mixed exploration with the mixture in the likelihood** (Slim Scheduler eqs. 5-6). The action
  is sampled from ``(1 - ε) π_θ + ε · uniform(valid)`` and the PPO ratio uses the log-probability of
  that mixture, so the importance weights stay correct while exploring.

The entropy bonus is that of the *learned* policy π_θ, not of the mixture (eq. 12 regularises the
network's own distribution; the uniform part has no parameters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

MASKED_LOGIT = -1.0e9
"""Logit given to masked actions: exp() underflows to exactly 0, unlike -inf it never makes NaN."""


class MaskedCategorical:
    """A batch of categorical distributions over ``n`` actions with optional mask and ε-mixture.

    Args:
        logits: Unnormalised log-probabilities, shape ``(batch, n)``.
        mask: Boolean ``(batch, n)``; True marks a valid action. Every row needs one valid action.
        epsilon: Exploration weight ε in [0, 1], a float or a ``(batch,)`` tensor; the sampling
            distribution becomes ``(1 - ε) softmax(logits) + ε / n_valid`` on valid actions (eq. 5).
    """

    def __init__(
        self,
        logits: torch.Tensor,
        mask: torch.Tensor | None = None,
        epsilon: float | torch.Tensor | None = None,
    ) -> None:
        if mask is not None:
            mask = mask.to(torch.bool)
            if not bool(mask.any(dim=-1).all()):
                raise ValueError("every row of the action mask needs at least one valid action")
            logits = logits.masked_fill(~mask, MASKED_LOGIT)
        self.mask = mask
        self.base_log_probs = torch.log_softmax(logits, dim=-1)
        self.log_probs = self._mix(self.base_log_probs, mask, epsilon)

    @staticmethod
    def _mix(
        base_log_probs: torch.Tensor,
        mask: torch.Tensor | None,
        epsilon: float | torch.Tensor | None,
    ) -> torch.Tensor:
        """log((1-ε) π + ε/n_valid) via logaddexp, so ε = 0 returns π's log-probs exactly."""
        if epsilon is None:
            return base_log_probs
        eps = torch.as_tensor(epsilon, dtype=base_log_probs.dtype, device=base_log_probs.device)
        if eps.dim() == 0:
            eps = eps.expand(base_log_probs.shape[0])
        eps = eps.unsqueeze(-1)
        if mask is None:
            n_valid = torch.full_like(eps, base_log_probs.shape[-1])
            uniform_log = torch.log(eps) - torch.log(n_valid)
            uniform_log = uniform_log.expand_as(base_log_probs)
        else:
            n_valid = mask.sum(dim=-1, keepdim=True).to(base_log_probs.dtype)
            uniform_log = torch.where(
                mask,
                torch.log(eps) - torch.log(n_valid),
                torch.full_like(base_log_probs, -math.inf),
            )
        return torch.logaddexp(torch.log1p(-eps) + base_log_probs, uniform_log)

    def sample(self) -> torch.Tensor:
        """Draws one action per row from the (mixed) distribution; shape ``(batch,)``."""
        return torch.multinomial(self.log_probs.exp(), 1).squeeze(-1)

    def mode(self) -> torch.Tensor:
        """The most likely action of the learned policy per row (greedy evaluation)."""
        return self.base_log_probs.argmax(dim=-1)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``action`` (shape ``(batch,)``) under the mixture (eq. 6)."""
        return self.log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy of the learned policy π_θ per row (eq. 12); masked actions contribute 0."""
        return -(self.base_log_probs.exp() * self.base_log_probs).sum(dim=-1)


class FactoredCategorical:
    """A product of independent categorical heads: π(a|s) = Π_k π_k(a_k|s) (Slim eq. 4).

    Args:
        logits: Concatenated logits of all heads, shape ``(batch, sum(head_sizes))``.
        head_sizes: Number of actions of each head.
        mask: Concatenated boolean masks, same shape as ``logits``, or None.
        epsilon: ε of the mixture (see :class:`MaskedCategorical`).
        epsilon_heads: Indices of the ε-mixed heads (the Slim router mixes the server head).
    """

    def __init__(
        self,
        logits: torch.Tensor,
        head_sizes: Sequence[int],
        mask: torch.Tensor | None = None,
        epsilon: float | torch.Tensor | None = None,
        epsilon_heads: Sequence[int] = (),
    ) -> None:
        if logits.shape[-1] != sum(head_sizes):
            raise ValueError(
                f"logits have {logits.shape[-1]} columns, heads need {sum(head_sizes)}"
            )
        logit_parts = torch.split(logits, list(head_sizes), dim=-1)
        mask_parts = (
            torch.split(mask, list(head_sizes), dim=-1)
            if mask is not None
            else [None] * len(head_sizes)
        )
        self.heads = [
            MaskedCategorical(part, part_mask, epsilon if k in epsilon_heads else None)
            for k, (part, part_mask) in enumerate(zip(logit_parts, mask_parts, strict=True))
        ]

    def sample(self) -> torch.Tensor:
        """One action per head and row, shape ``(batch, n_heads)``."""
        return torch.stack([head.sample() for head in self.heads], dim=-1)

    def mode(self) -> torch.Tensor:
        """The greedy action per head, shape ``(batch, n_heads)``."""
        return torch.stack([head.mode() for head in self.heads], dim=-1)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Joint log-probability: the sum over heads (eq. 6)."""
        return torch.stack(
            [head.log_prob(action[..., k]) for k, head in enumerate(self.heads)]
        ).sum(dim=0)

    def entropy(self) -> torch.Tensor:
        """Sum of the heads' entropies (eq. 12)."""
        return torch.stack([head.entropy() for head in self.heads]).sum(dim=0)
