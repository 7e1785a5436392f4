"""Deadline-aware rules on the cluster's predicted completion times (device model + queues).

Each rule reads, for every available server and width, the predicted time until the head image
would be complete (:attr:`~hetsched.slim.routers.base.ServerView.image_done_s`) and compares it
with the head request's remaining slack
(:attr:`~hetsched.slim.routers.base.RouterState.head_slack_s`):

* ``least-completion``: the (server, width) that finishes soonest (latency-greedy; in practice
  the slimmest width on the least-loaded fast server);
* ``slackfit``: the widest width whose predicted completion fits the slack, on the server that
  finishes it soonest (after SuperServe's SlackFit: wide while there is slack, narrowing as it
  shrinks);
* ``infaas``: the cheapest width that meets the SLO, on the server that spends the least energy
  on it (after INFaaS: the lowest-cost variant that meets the latency requirement, above an
  optional accuracy floor).

When nothing fits (the head is already late, or every queue is too long) all three place the
head where it finishes soonest: a late image should cost as little as possible.
"""

from __future__ import annotations

from abc import abstractmethod

from hetsched.slim.routers.base import (
    ROUTERS,
    Router,
    RouterState,
    RoutingDecision,
    available_servers,
)
from hetsched.slim.routers.predictions import (
    SLIMRESNET_SEGMENTS,
    Placement,
    device_seconds,
    expected_image_done,
    least_completion,
    placed_group,
    width_index,
)


def fitting_servers(
    state: RouterState, table: list[tuple[float, ...]], width: int, margin: float
) -> list[int]:
    """Available servers where the head image is predicted to finish within its slack at
    ``width`` with a relative safety ``margin`` (0.2: the prediction plus 20 %)."""
    slack_s = state.head_slack_s
    return [i for i in available_servers(state) if table[i][width] * (1.0 + margin) <= slack_s]


class _PredictionRule(Router):
    """The registry signature of the rules (``seed`` unused: they draw nothing), the expected
    completion table they read (:func:`~hetsched.slim.routers.predictions.expected_image_done`)
    and the decision assembled from a (server, width index) placement."""

    name = ""

    def __init__(
        self,
        seed: int = 0,
        group_size: int | None = None,
        num_segments: int = SLIMRESNET_SEGMENTS,
    ) -> None:
        self.group_size = group_size
        self.num_segments = num_segments

    def decide(self, state: RouterState) -> RoutingDecision:
        table = expected_image_done(state, self.name, self.num_segments)
        server, width = self.place(state, table)
        return RoutingDecision(server, state.widths[width], placed_group(state, self.group_size))

    @abstractmethod
    def place(self, state: RouterState, table: list[tuple[float, ...]]) -> Placement:
        """The (server, width index) for the head block."""


@ROUTERS.register("least-completion")
class LeastCompletionRouter(_PredictionRule):
    """Least predicted completion time over every (server, width): latency first, always."""

    name = "least-completion"

    def place(self, state: RouterState, table: list[tuple[float, ...]]) -> Placement:
        return least_completion(state, table)


@ROUTERS.register("slackfit")
class SlackFitRouter(_PredictionRule):
    """The widest width whose predicted completion fits the head's slack, on the server that
    finishes it soonest; the least completion when no width fits.

    Args:
        margin: Relative safety margin on the prediction, which ignores contention between
            concurrent batches and so errs early (0.2: a placement fits when 1.2 x its predicted
            completion is within the slack).
        seed: Unused; accepted for the registry's uniform signature.
        group_size: Fixed g (default: the largest group).
        num_segments: Segments per image (the backlog is charged once per remaining segment).
    """

    name = "slackfit"

    def __init__(
        self,
        seed: int = 0,
        group_size: int | None = None,
        margin: float = 0.2,
        num_segments: int = SLIMRESNET_SEGMENTS,
    ) -> None:
        super().__init__(seed, group_size, num_segments)
        self.margin = margin

    def place(self, state: RouterState, table: list[tuple[float, ...]]) -> Placement:
        for width in sorted(range(len(state.widths)), key=lambda w: -state.widths[w]):
            servers = fitting_servers(state, table, width, self.margin)
            if servers:
                return min(servers, key=lambda i: (table[i][width], i)), width
        return least_completion(state, table)


@ROUTERS.register("infaas")
class CheapestFitRouter(_PredictionRule):
    """The cheapest width (from ``min_width`` up) whose predicted completion fits the head's
    slack, on the fitting server with the least predicted energy; the least completion when no
    width fits.

    Energy of a placement is the server's board power limit times the device time the image
    still needs there (its lone device time), so a slow low-power
    server wins when it still meets the deadline.

    Args:
        min_width: Accuracy floor: the narrowest width the rule may choose (default: the
            cluster's slimmest).
        margin: Relative safety margin on the prediction (see :class:`SlackFitRouter`).
        seed: Unused; accepted for the registry's uniform signature.
        group_size: Fixed g (default: the largest group).
        num_segments: Segments per image (see :class:`SlackFitRouter`).
    """

    name = "infaas"

    def __init__(
        self,
        seed: int = 0,
        group_size: int | None = None,
        min_width: float | None = None,
        margin: float = 0.2,
        num_segments: int = SLIMRESNET_SEGMENTS,
    ) -> None:
        super().__init__(seed, group_size, num_segments)
        self.min_width = min_width
        self.margin = margin

    def place(self, state: RouterState, table: list[tuple[float, ...]]) -> Placement:
        floor = (
            min(state.widths)
            if self.min_width is None
            else state.widths[width_index(state, self.min_width, self.name)]
        )
        for width in sorted(range(len(state.widths)), key=lambda w: state.widths[w]):
            if state.widths[width] < floor:
                continue
            servers = fitting_servers(state, table, width, self.margin)
            if servers:
                energy_j = {
                    i: state.servers[i].max_power_w * device_seconds(state, i, width)
                    for i in servers
                }
                return min(servers, key=lambda i: (energy_j[i], i)), width
        return least_completion(state, table)
