"""A server's capacity in images per second, measured on the simulated device model.

Scenarios state their load as a multiple of the fastest server's capacity at width 1.0 ("1.5x"
means that server alone cannot keep up even if everything runs there). The capacity is not a
datasheet division: batches overlap their launch and memory time with other batches' compute and
slow down past the utilisation knee (see :mod:`hetsched.slim.sim.simulated_backend`), so it is
measured the way the cluster would see it: ``CAPACITY_IMAGES`` images arrive at once at one server
alone (greedy executor, the scenario's knobs), every segment at the given width in blocks of the
executor's B_max, the router taking no time; capacity = images / makespan. The simulation is
deterministic, so the figure is exact per (device, executor knobs, width), and it is cached.
"""

from __future__ import annotations

import numpy as np

from hetsched.core.devices import DeviceSpec
from hetsched.core.events import EventLoop
from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
from hetsched.slim.cluster.config import ClusterConfig
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.model.accuracy import load_accuracy_table
from hetsched.slim.model.costs import SegmentCostTable
from hetsched.slim.routers.base import RoutingDecision
from hetsched.slim.sim.network import LINK_PRESETS, Link
from hetsched.slim.sim.simulated_backend import SimulatedBackend

CAPACITY_IMAGES = 1000
"""Images in the measuring burst (the figure moves by under 1 % from 1,000 to 4,000)."""


_MEASURED: dict[tuple[str, str, float, int], tuple[float, SegmentCostTable]] = {}
"""(device, executor knobs as JSON, width, cost table id) -> (capacity, the table it is for)."""


def server_capacity_per_s(
    spec: DeviceSpec, costs: SegmentCostTable, executor: ExecutorConfig, width: float = 1.0
) -> float:
    """Images per second one server of ``spec`` completes when saturated at ``width`` (cached)."""
    key = (spec.model_dump_json(), executor.model_dump_json(), width, id(costs))
    if key not in _MEASURED:
        _MEASURED[key] = (_measure(spec, costs, executor, width), costs)
    return _MEASURED[key][0]


def _measure(
    spec: DeviceSpec, costs: SegmentCostTable, executor: ExecutorConfig, width: float
) -> float:
    """One saturating burst on a fresh server (see the module docstring)."""
    loop = EventLoop()
    backend = SimulatedBackend(spec, costs, loop)
    server = GreedyExecutor(backend, loop, executor)
    link = Link(loop, LINK_PRESETS["loopback"], costs)
    # every image equally easy: correctness plays no part in a capacity
    oracle = TableAccuracy(load_accuracy_table("paper"), np.zeros(CAPACITY_IMAGES))
    config = ClusterConfig(
        widths=executor.widths, group_sizes=(executor.max_batch,), decision_time_s=0.0
    )
    cluster = SlimCluster([server], loop, link.transfer_time, oracle, config)
    cluster.schedule_arrivals([0.0] * CAPACITY_IMAGES)
    decision = RoutingDecision(0, width, executor.max_batch)
    while cluster.next_state() is not None:
        cluster.route(decision)
    return CAPACITY_IMAGES / loop.now_s()
