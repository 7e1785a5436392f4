"""The small tanh MLP every jobs agent is built from (RLTune's scorer and critic, RLScheduler's
kernel, SchedInspector's inspector), initialised the way CleanRL initialises PPO networks."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from torch import nn


def tanh_mlp(sizes: Sequence[int], out_std: float) -> nn.Sequential:
    """Linear layers of ``sizes`` (input, hidden..., output) with tanh between them.

    Orthogonal weights (gain sqrt(2) for hidden layers, ``out_std`` for the output layer: small
    for a policy head so the first policy is near uniform, 1 for a value head) and zero biases.
    """
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
