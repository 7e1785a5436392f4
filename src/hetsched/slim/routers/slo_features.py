"""The learned router's extended observation and action: everything the rules read, and more.

Beyond the paper (issue 19): the eq. (1) state of :class:`~hetsched.slim.routers.ppo.StateEncoder`
knows neither the head request's deadline nor where its activation lies, so no router reading it
can keep an image on the server that holds its data or narrow the width as its slack shrinks. This
encoder gives the policy every signal the heuristics use, so it can do at least what they do:

* **global** (eq. 1): log(1 + q^fifo) / log(1 + queue_scale), c^done / arrived;
* **the head request**: its slack / time scale, which segment it needs (one-hot), whether it is
  still at the router's host, the width its previous segment ran at;
* **per server slot** (eq. 1 plus): present, available, log queue, P / P_max, U / 100, backlog and
  transfer in time scales, whether the head's activation lies there, and per width the expected
  completion less the slack (time scales; negative: it fits) and whether it fits
  (:func:`~hetsched.slim.routers.predictions.expected_image_done`);
* **the advisors' choices**: for each named rule (``slackfit``, ``jsq-0.5``, ...) a one-hot of the
  (server, width) it would pick. A policy cloned from one of them starts as exactly that rule and
  can learn when another one (or neither) does better.

All entries are clipped to [-OBS_CLIP, OBS_CLIP]. Servers are padded to ``max_servers`` slots
(absent slots read 0 and are masked), so one router serves clusters of up to that many servers.

The action is (placement, group): the placement head is the joint (server, width) choice, so a
mask can forbid exactly the pairs that cannot meet the deadline (the paper's factored server and
width heads, eq. 2, could only forbid a width on every server at once). Masked: absent and
unavailable servers, and, where at least one pair is predicted to meet the deadline, the pairs
whose optimistic prediction (:attr:`~hetsched.slim.routers.base.ServerView.image_done_s`, a lower
bound) misses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hetsched.slim.routers.base import Router, RouterState, RoutingDecision
from hetsched.slim.routers.predictions import (
    SLIMRESNET_SEGMENTS,
    expected_image_done,
    offered_load,
    predicted_image_done,
)
from hetsched.slim.routers.specs import create_router

OBS_CLIP = 4.0
"""Bound of every entry of the extended observation (the space is [-OBS_CLIP, OBS_CLIP])."""

DEFAULT_ADVISORS = (
    "constant-best",
    "jsq-0.25",
    "least-completion-0.5",
    "slackfit",
    "infaas",
    "backlog-width(threshold_s=0.012)",
)
"""Rules whose choices the learned router sees: the best rule of some scenario each (issue 19).
``least-completion-0.5`` rather than ``jsq-0.5``: with ``backlog-width`` beside it, a policy that
alternated between jsq's server choice (queue length) and backlog-width's (predicted completion)
met fewer bursty-3x deadlines than either rule alone (RESULTS, "a backlog-switched width rule").
``backlog-width`` switches at 12 ms of backlog here, not at the rule's own 16 ms: with the
shipped router's advisor set to 8, 10, 12 and 16 ms, the training's selection score on the
tuning seeds 100-104 was highest at 12 ms (more bursty-3x deadlines at little accuracy; RESULTS,
"the backlog advisor at 12 ms")."""

SERVER_FEATURES = 8
"""Per-server entries before the per-width ones (present ... head here)."""


@dataclass(frozen=True)
class SloEncoder:
    """Builds the extended observation and the joint (server, width) x group action.

    Args:
        max_servers: Server slots; a cluster may have fewer (padded) but not more.
        widths: The width choices.
        group_sizes: The group-size choices (second head).
        advisors: Registered rules (stateless) whose choices are features.
        time_scale_s: Seconds that map to 1.0 (slack, backlog, transfer, completion).
        queue_scale: Queue length that maps to 1.0 (log scale, as eq. 1's encoder).
        num_segments: Segments per image.
    """

    max_servers: int
    widths: tuple[float, ...]
    group_sizes: tuple[int, ...]
    advisors: tuple[str, ...] = DEFAULT_ADVISORS
    time_scale_s: float = 0.1
    queue_scale: float = 64.0
    num_segments: int = SLIMRESNET_SEGMENTS
    _advisor_routers: tuple[Router, ...] = field(init=False, repr=False, compare=False)

    kind = "slo"
    """Checkpoint tag of this encoder."""
    obs_low = -OBS_CLIP
    """Lower bound of every observation entry."""

    def __post_init__(self) -> None:
        routers = tuple(create_router(spec) for spec in self.advisors)
        object.__setattr__(self, "_advisor_routers", routers)

    @property
    def n_servers(self) -> int:
        """The most servers a cluster may have for this router (its server slots)."""
        return self.max_servers

    @property
    def placements(self) -> int:
        """Size of the joint (server, width) head."""
        return self.max_servers * len(self.widths)

    @property
    def obs_dim(self) -> int:
        """Global, head, per-server and advisor entries."""
        head = 3 + self.num_segments  # slack, segment one-hot, at the router host, prev width
        per_server = SERVER_FEATURES + 2 * len(self.widths)
        return 2 + head + self.max_servers * per_server + len(self.advisors) * self.placements

    @property
    def head_sizes(self) -> tuple[int, ...]:
        """(server x width placements, group sizes)."""
        return (self.placements, len(self.group_sizes))

    def settings(self) -> dict[str, object]:
        """The constructor's arguments, for a checkpoint."""
        return {
            "max_servers": self.max_servers,
            "widths": list(self.widths),
            "group_sizes": list(self.group_sizes),
            "advisors": list(self.advisors),
            "time_scale_s": self.time_scale_s,
            "queue_scale": self.queue_scale,
            "num_segments": self.num_segments,
        }

    def _check(self, state: RouterState) -> None:
        if len(state.servers) > self.max_servers:
            raise ValueError(f"state has {len(state.servers)} servers, router {self.max_servers}")
        if state.widths != self.widths:
            raise ValueError(f"state widths {state.widths} differ from the router's {self.widths}")

    def encode(self, state: RouterState) -> np.ndarray:
        """The extended observation of ``state`` as float32 (see the module docstring)."""
        self._check(state)
        scale, log_scale = self.time_scale_s, math.log1p(self.queue_scale)
        slack_s = state.head_slack_s
        segment = [0.0] * self.num_segments
        segment[min(state.head_segment, self.num_segments - 1)] = 1.0
        values = [
            math.log1p(state.fifo_length) / log_scale,
            state.completed / max(1, state.arrived),
            _clipped(slack_s / scale),
            *segment,
            1.0 if state.head_location is None else 0.0,
            state.head_prev_width or 0.0,
        ]
        expected = expected_image_done(state, "learned", self.num_segments)
        for index in range(self.max_servers):
            if index >= len(state.servers):
                values += [0.0] * (SERVER_FEATURES + 2 * len(self.widths))
                continue
            view = state.servers[index]
            values += [
                1.0,
                1.0 if view.available else 0.0,
                math.log1p(view.queue_length) / log_scale,
                view.power_w / view.max_power_w,
                view.utilization_pct / 100.0,
                _clipped(view.backlog_s / scale),
                _clipped(view.transfer_s / scale),
                1.0 if state.head_location == index else 0.0,
            ]
            values += [_clipped((done_s - slack_s) / scale) for done_s in expected[index]]
            values += [1.0 if done_s <= slack_s else 0.0 for done_s in expected[index]]
        for advice in self.advice(state):
            choice = [0.0] * self.placements
            choice[self.placement(advice)] = 1.0
            values += choice
        return np.asarray(values, dtype=np.float32)

    def advice(self, state: RouterState) -> list[RoutingDecision]:
        """Each advisor's decision on ``state``, in :attr:`advisors` order."""
        return [advisor.decide(state) for advisor in self._advisor_routers]

    def mask(self, state: RouterState) -> np.ndarray:
        """Valid placements (see the module docstring), then every group size."""
        self._check(state)
        count = len(state.servers)
        servers = [i < count and state.servers[i].available for i in range(self.max_servers)]
        if not any(servers):
            servers = [i < count for i in range(self.max_servers)]
        widths = len(self.widths)
        valid = [servers[p // widths] for p in range(self.placements)]
        optimistic = predicted_image_done(state, "learned")
        fits = [
            valid[p] and optimistic[p // widths][p % widths] <= state.head_slack_s
            for p in range(self.placements)
        ]
        placements = fits if any(fits) else valid
        return np.asarray(placements + [True] * len(self.group_sizes), dtype=bool)

    def placement(self, decision: RoutingDecision) -> int:
        """Index of ``decision``'s (server, width) in the placement head."""
        return decision.server * len(self.widths) + self.widths.index(decision.width)

    def action(self, decision: RoutingDecision) -> np.ndarray:
        """The action indices of ``decision`` (a teacher's choice, for behaviour cloning)."""
        return np.asarray(
            [self.placement(decision), self.group_sizes.index(decision.group_size)],
            dtype=np.int64,
        )

    def imitation(self, rule: str, decision: RoutingDecision) -> np.ndarray:
        """The action that imitates ``decision`` of the registered ``rule`` (:meth:`action`)."""
        return self.action(decision)

    def decision(self, action: np.ndarray) -> RoutingDecision:
        """Maps action indices (placement, group index) to a decision."""
        placement, group_index = (int(a) for a in action)
        server, width_index = divmod(placement, len(self.widths))
        return RoutingDecision(server, self.widths[width_index], self.group_sizes[group_index])


def _clipped(value: float) -> float:
    """``value`` within [-OBS_CLIP, OBS_CLIP] (infinite slack saturates)."""
    return -OBS_CLIP if value < -OBS_CLIP else OBS_CLIP if value > OBS_CLIP else value


@dataclass(frozen=True)
class AdviceEncoder(SloEncoder):
    """The extended observation with a smaller action: which advisor rule to follow now.

    Beyond the paper (issue 19): the joint (server, width) head must learn from scratch what a rule
    already knows (which placements fit, which server is least loaded); this head only learns
    *when* each rule is right — e.g. SlackFit's wide widths while queues are short, a slim
    join-shortest-queue in a burst. A policy that always picks one index is exactly that rule, so
    the learned router can only lose to a rule it could have copied by failing to learn.

    The action is one index into :attr:`advisors`; every index is valid (each rule places the
    head on an available server itself). Decoding needs the advisors' decisions on the state the
    action answers: :meth:`encode` keeps them, so :meth:`decision` and :meth:`action` refer to
    the state encoded last (the order in which the environment and the router call them).
    """

    _last_advice: list[RoutingDecision] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    kind = "advice"
    """Checkpoint tag of this encoder."""

    @property
    def obs_dim(self) -> int:
        """The extended observation and one offered-load entry per width."""
        return super().obs_dim + len(self.widths)

    @property
    def head_sizes(self) -> tuple[int, ...]:
        """(advisors,): one index."""
        return (len(self.advisors),)

    def encode(self, state: RouterState) -> np.ndarray:
        """The extended observation, then :meth:`offered_load` per width."""
        load = np.asarray(self.offered_load(state), dtype=np.float32)
        return np.concatenate((super().encode(state), load))

    def offered_load(self, state: RouterState) -> list[float]:
        """:func:`~hetsched.slim.routers.predictions.offered_load` per width, clipped to
        [0, OBS_CLIP]. Which rule is right depends on it (SlackFit's wide widths are safe well
        below 1 at the wide widths, not in an overload): two clusters with short queues, one at
        half its wide-width capacity and one above it, look alike until the second one's queues
        grow."""
        return [min(OBS_CLIP, load) for load in offered_load(state, self.num_segments)]

    def advice(self, state: RouterState) -> list[RoutingDecision]:
        """Each advisor's decision on ``state``, kept for :meth:`decision`."""
        self._last_advice[:] = super().advice(state)
        return self._last_advice

    def mask(self, state: RouterState) -> np.ndarray:
        """Every advisor is always valid."""
        self._check(state)
        return np.ones(len(self.advisors), dtype=bool)

    def action(self, decision: RoutingDecision) -> np.ndarray:
        """The first advisor (in :attr:`advisors` order) that made ``decision`` on the state
        encoded last (a teacher's choice, for behaviour cloning).

        Raises:
            ValueError: If no advisor made it (the teacher must be one of the advisors).
        """
        if decision not in self._last_advice:
            raise ValueError(f"no advisor made {decision} (teach with one of {self.advisors})")
        return np.asarray([self._last_advice.index(decision)], dtype=np.int64)

    def imitation(self, rule: str, decision: RoutingDecision) -> np.ndarray:
        """``rule``'s own index when it is an advisor that made ``decision`` (so cloning one rule
        learns one constant index, however often other advisors agree with it), else
        :meth:`action`."""
        if rule in self.advisors:
            index = self.advisors.index(rule)
            if self._last_advice[index] == decision:
                return np.asarray([index], dtype=np.int64)
        return self.action(decision)

    def decision(self, action: np.ndarray) -> RoutingDecision:
        """The decision of the advisor ``action`` names, on the state encoded last.

        Raises:
            ValueError: Before any state was encoded.
        """
        if not self._last_advice:
            raise ValueError("advice encoder: encode a state before decoding an action")
        return self._last_advice[int(np.asarray(action).reshape(-1)[0])]
