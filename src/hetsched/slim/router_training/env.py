"""A Gymnasium environment for the Slim router's decision, so any RL library can train a router.

Delayed rewards
---------------
A routing decision's reward (eq. 7) is only known when its block's segment completes, which in
simulated time is later than the next few decisions. The environment therefore returns, at
each ``step``, the summed reward of every block that completed since the previous step (so episode
returns are exact and any return-based learner works), and reports in ``info``:

* ``decision_id``: the id of the decision the *next* action makes;
* ``reward_credits``: ``[(decision_id, reward), ...]`` for the blocks completed during this step.

:func:`hetsched.rl.train` with ``advantage="one_step"`` uses these credits to give each decision its
own reward, which is the paper's one-step return R_t = r_t (eq. 8). An episode ends
(``terminated``) when every image of the episode has completed, so every decision is credited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.routers.base import RouterState
from hetsched.slim.routers.ppo import OBS_CLIP, StateEncoder
from hetsched.slim.routers.reward import RewardWeights, block_reward


class SlimRoutingEnv(gym.Env):
    """Place the head block of the global FIFO of a simulated Slim cluster.

    Action Space:
        ``MultiDiscrete([N, |W|, |G|])``: server index, width index, group-size index (eq. 2).

    Observation Space:
        ``Box(0, OBS_CLIP, (2 + 3N,), float32)``: Slim eq. (1) normalised by
        :class:`~hetsched.slim.routers.ppo.StateEncoder`.

    Rewards:
        Eq. (7) per block, delivered when the block completes (see the module docstring).

    Episode End:
        Terminated when every image of the episode's workload has completed.

    Arguments:
        make_cluster: Builds a fresh cluster with its workload scheduled, from an episode seed.
        encoder: State encoder / action decoder matching the cluster.
        weights: Reward weights (eq. 7).
        mean_top1: Mean top-1 of the accuracy table, for the optional centring of p̃_acc.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(
        self,
        make_cluster: Callable[[int], SlimCluster],
        encoder: StateEncoder,
        weights: RewardWeights,
        mean_top1: float = 0.0,
    ) -> None:
        self.make_cluster = make_cluster
        self.encoder = encoder
        self.weights = weights
        self.mean_top1 = mean_top1
        self.action_space = gym.spaces.MultiDiscrete(list(encoder.head_sizes))
        self.observation_space = gym.spaces.Box(
            0.0, OBS_CLIP, shape=(encoder.obs_dim,), dtype=np.float32
        )
        self.cluster: SlimCluster | None = None
        self._state: RouterState | None = None
        self._decision_id = 0

    def _info(self, credits: list[tuple[int, float]]) -> dict[str, Any]:
        assert self._state is not None
        return {
            "action_mask": self.encoder.mask(self._state),
            "decision_id": self._decision_id,
            "reward_credits": credits,
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.cluster = self.make_cluster(int(self.np_random.integers(2**31 - 1)))
        self._state = self.cluster.next_state()
        if self._state is None:
            raise ValueError("the cluster's workload is empty: nothing to route")
        self._decision_id = 0
        return self.encoder.encode(self._state), self._info([])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.cluster is None or self._state is None:
            raise RuntimeError("call reset() before step()")
        self.cluster.route(self.encoder.decision(np.asarray(action)))
        self._decision_id += 1
        next_state = self.cluster.next_state()
        terminated = next_state is None
        if next_state is not None:
            self._state = next_state
        else:
            self._state = self.cluster.state()
        credits = [
            (decision_id, block_reward(outcome, self.weights, self.mean_top1))
            for decision_id, outcome in self.cluster.block_outcomes
        ]
        self.cluster.block_outcomes.clear()
        reward = float(sum(r for _, r in credits))
        return self.encoder.encode(self._state), reward, terminated, False, self._info(credits)
