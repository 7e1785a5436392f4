"""Fixed-width rules: the constant best server, and join-the-shortest-queue at each width.

Neither reads a deadline. They are the answer to "does a learned router beat a one-line rule?"
(issue 19): in the paper's scenario every segment on the fastest server at width 1.0 beat both
trained PPO routers on accuracy, latency and energy at once.
"""

from __future__ import annotations

from hetsched.slim.routers.base import (
    ROUTERS,
    Router,
    RouterState,
    RoutingDecision,
    available_servers,
)
from hetsched.slim.routers.predictions import (
    device_seconds,
    placed_group,
    predicted_image_done,
    width_index,
)


@ROUTERS.register("constant-best")
class ConstantBestServerRouter(Router):
    """Every segment on the fastest server at the widest width, in the largest group.

    The fastest server is the one whose device would finish a lone image at the widest width
    soonest (the device model's prediction less transfer and backlog, so the ranking never moves
    with the load); the rule only takes the next in that ranking while the fastest is down.

    Args:
        seed: Unused (the rule draws nothing); accepted for the registry's uniform signature.
        group_size: Fixed g (default: the largest group).
    """

    def __init__(self, seed: int = 0, group_size: int | None = None) -> None:
        self.group_size = group_size

    def decide(self, state: RouterState) -> RoutingDecision:
        widest = state.widths.index(max(state.widths))
        predicted_image_done(state, "constant-best")
        server = min(available_servers(state), key=lambda i: (device_seconds(state, i, widest), i))
        return RoutingDecision(server, state.widths[widest], placed_group(state, self.group_size))


class JoinShortestQueueRouter(Router):
    """Join-the-shortest-queue at one fixed width, in the largest group.

    The shortest queue counts segment requests waiting on (or travelling to) a server; ties go to
    the smaller predicted backlog, then the lower index. Registered once per width as
    ``jsq-<width>``.

    Args:
        width: The width every segment runs at.
        seed: Unused; accepted for the registry's uniform signature.
        group_size: Fixed g (default: the largest group).
    """

    fixed_width = 1.0
    """The width of the registered subclass (``jsq-1.0``)."""

    def __init__(
        self, seed: int = 0, group_size: int | None = None, width: float | None = None
    ) -> None:
        self.width = self.fixed_width if width is None else width
        self.group_size = group_size

    def decide(self, state: RouterState) -> RoutingDecision:
        index = width_index(state, self.width, "jsq")
        server = min(
            available_servers(state),
            key=lambda i: (state.servers[i].queue_length, state.servers[i].backlog_s, i),
        )
        return RoutingDecision(server, state.widths[index], placed_group(state, self.group_size))


@ROUTERS.register("jsq-0.25")
class JoinShortestQueueSlimmestRouter(JoinShortestQueueRouter):
    """Join-the-shortest-queue at width 0.25."""

    fixed_width = 0.25


@ROUTERS.register("jsq-0.5")
class JoinShortestQueueHalfRouter(JoinShortestQueueRouter):
    """Join-the-shortest-queue at width 0.5."""

    fixed_width = 0.5


@ROUTERS.register("jsq-0.75")
class JoinShortestQueueThreeQuarterRouter(JoinShortestQueueRouter):
    """Join-the-shortest-queue at width 0.75."""

    fixed_width = 0.75


@ROUTERS.register("jsq-1.0")
class JoinShortestQueueWidestRouter(JoinShortestQueueRouter):
    """Join-the-shortest-queue at width 1.0."""

    fixed_width = 1.0
