"""Predicted completion times for servers that compute for real: each server's device model
(datasheet or measured profile) on the served model's segment costs, activations moved in
memory.

The live experiments (:mod:`hetsched.slim.live.cluster`) and the serving front
(:mod:`hetsched.slim.serving.runtime`) run real devices but route with rules that read
predictions (``least-completion``, ``slackfit``, ``infaas``, ``backlog-width``, the learned
router); both take them from here, the same way the simulated scenarios do, so a rule behaves
alike in the three. A device model's figures are only as right as the spec: a measured profile
(``hetsched slim profile``) beats a datasheet entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from hetsched.core.devices import DeviceSpec
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.model.costs import SegmentCostTable
from hetsched.slim.sim.simulated_backend import batch_alone_s


def in_memory_transfer(
    segment: int, prev_width: float | None, source: int | None, target: int
) -> float:
    """The loopback link: no predicted delay (the real copy cost is inside measured latencies)."""
    return 0.0


def device_completion_model(
    specs: Sequence[DeviceSpec],
    costs: SegmentCostTable,
    widths: Sequence[float],
    max_batch: int,
) -> CompletionModel:
    """A :class:`CompletionModel` of one server per spec (router index order) on ``costs``,
    booking each queued request's share of a ``max_batch`` batch, with no transfer time."""
    return CompletionModel(
        [partial(batch_alone_s, spec, costs) for spec in specs],
        in_memory_transfer,
        widths,
        costs.num_segments,
        max_batch,
    )
