"""The router's reward, Slim Scheduler eq. (7), its SLO extension and the presets.

    r_t = α p̃_acc − β L_t − γ E_t − δ Var(U_t^(1..N) / 100) + b_t − ζ m_t

Each routed block earns one reward when its segment completes: ``p̃_acc`` is the accuracy prior of
the width prefix the block's requests have run so far (nearest-neighbour lookup in the accuracy
table) or, after the final segment, the fraction of the block's images that were classified
correctly; ``L_t`` the block's latency; ``E_t = P̄_t · L_t`` with P̄ the mean power across servers;
the imbalance term the variance of the servers' normalised utilisations; ``b_t`` an optional bonus
per request carried forward.

The last term is beyond the paper (issue 19): ``m_t`` is the share of the block's images that
finished after their deadline (SLO misses), known only once those images have completed all their
segments, so a decision that makes an image late is charged for it even when the miss shows at a
later segment. With ``ζ = 0`` (every preset but ``slo``) the reward is the paper's eq. (7) exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from hetsched.core.config import StrictModel
from hetsched.core.errors import ConfigError


class RewardWeights(StrictModel, use_attribute_docstrings=True):
    """Weights of eq. (7); any values by config, or a preset by name."""

    alpha: float = Field(1.0, ge=0)
    """α: weight of the accuracy prior / correctness (per unit of accuracy in [0, 1])."""
    beta: float = Field(1.0, ge=0)
    """β: latency penalty per second."""
    gamma: float = Field(0.0, ge=0)
    """γ: energy penalty per joule."""
    delta: float = Field(0.0, ge=0)
    """δ: penalty on the variance of normalised utilisation across servers."""
    bonus: float = 0.0
    """b: bonus per request the block carried one segment forward. It rewards throughput, which a
    one-step return cannot see otherwise: a larger group g drains the global FIFO for the *later*
    decisions, while this decision's own latency only grows with g."""
    center_accuracy: bool = False
    """Subtract the table's mean top-1 from p̃_acc (the paper's optional zero-mean centring)."""
    slo_miss: float = Field(0.0, ge=0)
    """ζ: penalty per unit share of the block's images that missed their deadline (beyond the
    paper; 0 keeps eq. 7 exact)."""


REWARD_PRESETS: dict[str, RewardWeights] = {
    # Table IV regime: latency and energy dominate; the policy collapses to the slimmest paths.
    "efficiency": RewardWeights(alpha=1.0, beta=20.0, gamma=0.5, delta=1.0, bonus=0.2),
    # Table V regime: accuracy matters; latency and energy are penalised lightly.
    "balanced": RewardWeights(alpha=10.0, beta=2.0, gamma=0.01, delta=1.0, center_accuracy=True),
    # Beyond the paper: meet every deadline first, then be as accurate as possible. A miss costs
    # more than the whole accuracy gap between widths 0.25 and 1.0 (about 6 points of top-1).
    "slo": RewardWeights(alpha=1.0, beta=0.5, center_accuracy=True, slo_miss=1.0),
}


def reward_weights(preset: str | RewardWeights) -> RewardWeights:
    """Resolves a preset name (``efficiency``, ``balanced``, ``slo``) or passes weights through."""
    if isinstance(preset, RewardWeights):
        return preset
    try:
        return REWARD_PRESETS[preset]
    except KeyError:
        known = ", ".join(sorted(REWARD_PRESETS))
        raise ConfigError(f"unknown reward preset {preset!r}; known: {known}") from None


@dataclass(frozen=True)
class BlockOutcome:
    """What happened to one routed block, measured when its segment completed."""

    accuracy: float
    """p̃_acc in [0, 1]: prefix prior (segments 1-3) or realised correctness (final segment)."""
    latency_s: float
    """L_t: from the block's requests entering the global FIFO to the last one finishing."""
    mean_power_w: float
    """P̄_t: mean power across servers at completion."""
    utilizations_pct: tuple[float, ...]
    """U_t of every server at completion, 0-100."""
    requests: int = 1
    """Requests in the block (g, or fewer when the FIFO was shorter)."""
    images_completed: int = 0
    """Images this block finished (nonzero only for the final segment)."""

    @property
    def energy_j(self) -> float:
        """E_t = P̄_t · L_t (eq. 7)."""
        return self.mean_power_w * self.latency_s


def utilization_variance(utilizations_pct: tuple[float, ...] | list[float]) -> float:
    """Var(U / 100) across servers: the imbalance term of eq. (7) and of Tables III-V."""
    if not utilizations_pct:
        return 0.0
    return float(np.var(np.asarray(utilizations_pct, dtype=float) / 100.0))


def block_reward(
    outcome: BlockOutcome,
    weights: RewardWeights,
    mean_top1: float = 0.0,
    missed_share: float = 0.0,
) -> float:
    """Eq. (7) for one block, minus ζ times ``missed_share`` (the share of its images that missed
    their deadline); ``mean_top1`` is subtracted from p̃_acc when centring is on."""
    accuracy = outcome.accuracy - (mean_top1 if weights.center_accuracy else 0.0)
    return (
        weights.alpha * accuracy
        - weights.beta * outcome.latency_s
        - weights.gamma * outcome.energy_j
        - weights.delta * utilization_variance(outcome.utilizations_pct)
        + weights.bonus * outcome.requests
        - weights.slo_miss * missed_share
    )
