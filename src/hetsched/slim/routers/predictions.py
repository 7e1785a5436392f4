"""What the prediction-reading rules share: a checked view of the cluster's predicted completion
times, the group size they place, and the server/width pair they fall back to.

The rules in :mod:`hetsched.slim.routers.queue_rules` and :mod:`hetsched.slim.routers.slo_rules`
(and the learned router's features) read :attr:`ServerView.image_done_s`, which the cluster fills
only when it has a device cost model (the simulated scenarios); a rule that needs it says so in one
line instead of failing on an empty tuple.
"""

from __future__ import annotations

import math

from hetsched.core.errors import ConfigError
from hetsched.slim.routers.base import RouterState, available_servers

Placement = tuple[int, int]
"""(server index, width index into :attr:`RouterState.widths`)."""


SLIMRESNET_SEGMENTS = 4
"""Segments per image of the paper's SlimResNet (the default of the rules' ``num_segments``)."""


def predicted_image_done(state: RouterState, router: str) -> list[tuple[float, ...]]:
    """The cluster's :attr:`ServerView.image_done_s` of every server, checked to be there.

    Raises:
        ConfigError: If the cluster gives no predictions (no device cost model).
    """
    rows = [server.image_done_s for server in state.servers]
    if any(len(row) != len(state.widths) for row in rows):
        raise ConfigError(
            f"router {router} needs predicted completion times, which only a cluster with a"
            " device cost model gives (the simulated scenarios)"
        )
    return rows


def expected_image_done(
    state: RouterState, router: str, num_segments: int = SLIMRESNET_SEGMENTS
) -> list[tuple[float, ...]]:
    """Per server, per width: expected seconds until the head image would be complete there.

    The cluster's prediction charges the server's backlog once, but every remaining segment
    re-enters the global FIFO and queues behind that server's backlog again; under load that
    undercounts segment 0's wait by about three backlogs (measured on lan-3x and lan-1.5x:
    actual/predicted 1.4-1.5 for segment 0, 1.1 for segment 2). So the backlog is charged once per
    remaining segment, on the assumption that it stays as long as it is now.

    Raises:
        ConfigError: If the cluster gives no predictions (no device cost model).
    """
    requeues = max(0, num_segments - state.head_segment - 1)
    return [
        tuple(done_s + requeues * view.backlog_s for done_s in row)
        for row, view in zip(predicted_image_done(state, router), state.servers, strict=True)
    ]


def expected_block_done(
    state: RouterState, router: str, group_size: int, num_segments: int = SLIMRESNET_SEGMENTS
) -> list[tuple[float, ...]]:
    """:func:`expected_image_done` for the block a rule places: the FIFO's first
    ``min(fifo length, group_size)`` requests, taken to run as one batch of the head's key at
    every remaining segment (:meth:`ServerView.block_image_done_s`). Where a server's batch
    time grows with the batch (a CPU), this is what the head waits for; the lone prediction
    is the block of one.

    Raises:
        ConfigError: If the cluster gives no predictions (no device cost model).
    """
    predicted_image_done(state, router)  # the same check and message
    requests = max(1, min(state.fifo_length, group_size))
    requeues = max(0, num_segments - state.head_segment - 1)
    return [
        tuple(done_s + requeues * view.backlog_s for done_s in view.block_image_done_s(requests))
        for view in state.servers
    ]


def device_seconds(state: RouterState, server: int, width: int) -> float:
    """Device time the head image still needs on ``server`` at ``width`` if it ran there alone
    (the prediction less its transfer and the backlog ahead of it)."""
    view = state.servers[server]
    return view.image_done_s[width] - view.transfer_s - view.backlog_s


def offered_load(state: RouterState, num_segments: int = SLIMRESNET_SEGMENTS) -> list[float]:
    """Per width, the images arriving per second (the mean since the episode began) over what
    the available servers could finish per second if every image ran at that width alone
    (infinite with no capacity).

    The capacity comes from the device model's lone time of the head image's remaining
    segments, scaled to a whole image: segments differ in cost, so it is an estimate, and
    batching makes the real capacity larger by a factor a rule's target or a policy absorbs.
    Queues and slack show an overload only once it has done its damage; this shows it from the
    arrival rate.
    """
    rate_per_s = state.arrived / state.now_s if state.now_s > 0 else 0.0
    scale = num_segments / max(1, num_segments - state.head_segment)
    servers = available_servers(state)
    loads = []
    for width in range(len(state.widths)):
        per_s = sum(1.0 / max(1e-6, scale * device_seconds(state, i, width)) for i in servers)
        loads.append(rate_per_s / per_s if per_s > 0 else math.inf)
    return loads


def placed_group(state: RouterState, group_size: int | None) -> int:
    """``group_size`` when given, else the largest group: a rule that knows where the head goes
    sends as many requests as it may, so the one-block-per-interval router never becomes the
    bottleneck under load (at light load the FIFO is short and g does not matter)."""
    return max(state.group_sizes) if group_size is None else group_size


def least_completion(state: RouterState, table: list[tuple[float, ...]]) -> Placement:
    """The available (server, width) with the earliest predicted image completion; ties go to
    the wider width, then the lower server index."""
    return min(
        (
            (server, width)
            for server in available_servers(state)
            for width in range(len(state.widths))
        ),
        key=lambda p: (table[p[0]][p[1]], -state.widths[p[1]], p[0]),
    )


def width_index(state: RouterState, width: float, router: str) -> int:
    """Index of ``width`` in the state's widths.

    Raises:
        ConfigError: If the cluster offers no such width.
    """
    if width not in state.widths:
        raise ConfigError(
            f"router {router}: width {width:g} is not one of the cluster's widths"
            f" {list(state.widths)}"
        )
    return state.widths.index(width)
