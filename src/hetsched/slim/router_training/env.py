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

With an SLO term in the reward (ζ > 0, beyond the paper) a decision is credited only once the
images it moved have completed too (:class:`~hetsched.slim.router_training.slo_credit.SloCredit`),
so its reward includes the share of them that missed their deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

import gymnasium as gym
import numpy as np

from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.router_training.slo_credit import SloCredit
from hetsched.slim.routers.base import RouterState
from hetsched.slim.routers.ppo import RouterEncoder
from hetsched.slim.routers.reward import RewardWeights, block_reward
from hetsched.slim.routers.slo_features import OBS_CLIP


class SlimRoutingEnv(gym.Env):
    """Place the head block of the global FIFO of a simulated Slim cluster.

    Action Space:
        ``MultiDiscrete(encoder.head_sizes)``: server, width and group-size indices (eq. 2) with
        :class:`~hetsched.slim.routers.ppo.StateEncoder`; the joint (server, width) placement and
        the group-size index with :class:`~hetsched.slim.routers.slo_features.SloEncoder`.

    Observation Space:
        ``Box(encoder.obs_low, OBS_CLIP, (encoder.obs_dim,), float32)``: Slim eq. (1) normalised
        (``StateEncoder``), or the extended observation (``SloEncoder``). ``info["action_mask"]``
        marks the valid actions.

    Rewards:
        Eq. (7) per block (minus ζ times the share of its images that missed their deadline),
        delivered when the block (and, with ζ > 0, its images) completed; see the module
        docstring.

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
        encoder: RouterEncoder,
        weights: RewardWeights,
        mean_top1: float = 0.0,
    ) -> None:
        self.make_cluster = make_cluster
        self.encoder = encoder
        self.weights = weights
        self.mean_top1 = mean_top1
        self.action_space = gym.spaces.MultiDiscrete(list(encoder.head_sizes))
        self.observation_space = gym.spaces.Box(
            encoder.obs_low, OBS_CLIP, shape=(encoder.obs_dim,), dtype=np.float32
        )
        self.cluster: SlimCluster | None = None
        self._state: RouterState | None = None
        self._decision_id = 0
        self._slo_credit = SloCredit()
        self._completed_seen = 0

    @property
    def router_state(self) -> RouterState:
        """The state the next action decides on (a teacher rule reads it in behaviour cloning)."""
        if self._state is None:
            raise RuntimeError("call reset() before reading the router state")
        return self._state

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
        self._slo_credit = SloCredit()
        self._completed_seen = 0
        return self.encoder.encode(self._state), self._info([])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.cluster is None or self._state is None:
            raise RuntimeError("call reset() before step()")
        cluster = self.cluster
        decision = self.encoder.decision(np.asarray(action))
        block = islice(cluster.fifo, min(decision.group_size, len(cluster.fifo)))
        image_ids = [request.image_id for request in block] if self.weights.slo_miss > 0 else []
        decision_id = cluster.route(decision)
        if image_ids:
            self._slo_credit.routed(decision_id, image_ids)
        self._decision_id += 1
        next_state = cluster.next_state()
        terminated = next_state is None
        self._state = next_state if next_state is not None else cluster.state()
        credits = self._credits()
        reward = float(sum(r for _, r in credits))
        return self.encoder.encode(self._state), reward, terminated, False, self._info(credits)

    def _credits(self) -> list[tuple[int, float]]:
        """(decision id, reward) of every decision whose reward became known in this step."""
        cluster, weights, mean_top1 = self.cluster, self.weights, self.mean_top1
        assert cluster is not None
        outcomes = list(cluster.block_outcomes)
        cluster.block_outcomes.clear()
        if weights.slo_miss == 0:  # the paper's eq. (7): credited when the block completes
            return [(d, block_reward(outcome, weights, mean_top1)) for d, outcome in outcomes]
        credit = self._slo_credit
        for decision_id, outcome in outcomes:
            credit.block_done(decision_id, outcome)
        credit.images_done(cluster.completed[self._completed_seen :])
        self._completed_seen = len(cluster.completed)
        return [
            (d, block_reward(outcome, weights, mean_top1, missed))
            for d, outcome, missed in credit.take_ready()
        ]
