"""The paper's 3-GPU scenario (and variants) as one config, built into a runnable cluster.

Defaults reproduce the setup of the Slim Scheduler paper's section IV.4: two RTX 2080 Ti and one
GTX 980 Ti servers, each running the greedy executor (Algorithm 1,
:class:`~hetsched.slim.executor.greedy.GreedyExecutor`) on the simulated backend
(:class:`~hetsched.slim.sim.simulated_backend.SimulatedBackend`, costs from the analytic SlimResNet
cost table for CIFAR-100), activations moving over a shared Wi-Fi 5 link
(:mod:`hetsched.slim.sim.network`), bursty arrivals (:mod:`hetsched.slim.sim.workload`), the paper's
accuracy table (Tables I/II with nearest-neighbour lookup) or a measured one. Given other
:class:`ClusterServers` (the live ones of :class:`~hetsched.slim.live.cluster.LiveSetup`) the
same scenario runs there; this module does not know the live side.
"""

from __future__ import annotations

from functools import cache, partial
from itertools import product
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field, field_validator, model_validator

from hetsched.core.config import StrictModel, validate_config
from hetsched.core.devices import DeviceSpec, load_device
from hetsched.core.errors import ConfigError, HetschedError
from hetsched.core.events import EventLoop
from hetsched.core.seeding import make_rng
from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.cluster.config import ClusterConfig
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.model.accuracy import AccuracyTable, load_accuracy_table
from hetsched.slim.model.costs import SegmentCostTable, compute_cost_table
from hetsched.slim.routers.ppo import StateEncoder
from hetsched.slim.sim.capacity import server_capacity_per_s
from hetsched.slim.sim.network import Link, link_config
from hetsched.slim.sim.runtime_changes import RuntimeChange, schedule_changes
from hetsched.slim.sim.simulated_backend import SimulatedBackend, batch_alone_s
from hetsched.slim.sim.workload import (
    BURST_RATE_FACTOR,
    DIURNAL_AMPLITUDE,
    DIURNAL_PERIOD_S,
)
from hetsched.slim.sim.workload import arrival_times_s as draw_arrivals

CIFAR100_CLASSES = 100


class ScenarioConfig(StrictModel, use_attribute_docstrings=True):
    """Everything that defines a routing workload; every field has the paper's setup as default.

    Named scenarios ship as YAML files of these fields (:mod:`hetsched.slim.sim.scenario_catalog`).
    """

    description: str = ""
    """One line on what the scenario tests (shown by ``hetsched slim scenarios``)."""
    held_out: bool = False
    """Never used to train a router: evaluation on it measures generalisation."""
    servers: tuple[str, ...] = Field(("rtx-2080-ti", "rtx-2080-ti", "gtx-980-ti"), min_length=1)
    """Device of each server: a name from ``hetsched.core.devices.DEVICES`` or a profile JSON
    written by ``hetsched slim profile``."""
    link: str = "wifi5"
    """Network preset between servers (``hetsched.slim.sim.network``)."""
    accuracy_table: str = "paper"
    """``paper`` (Tables I/II, nearest neighbour) or the path of a measured accuracy table."""
    image_size: int = Field(32, ge=8)
    """Side of the served model's square input images: with ``num_classes`` it sets the
    simulated costs (FLOPs, weights, activation bytes; CIFAR-100 by default). A scenario that
    simulates a live model (e.g. 8x8 digits) names its size, or its costs are CIFAR's. Live runs
    take the served checkpoint's own costs whatever this says."""
    num_classes: int = Field(CIFAR100_CLASSES, ge=2)
    """Classes of the served model (its last segment's output)."""
    num_images: int = Field(1000, ge=1)
    """Images per workload (one episode / one evaluation run)."""
    arrival: Literal["bursty", "poisson", "diurnal"] = "bursty"
    """Arrival process of images (:func:`hetsched.slim.sim.workload.arrival_times_s`)."""
    rate_per_s: float = Field(400.0, gt=0)
    """Mean arrival rate r in images per second (unless ``load_factor`` sets it)."""
    load_factor: float | None = Field(None, gt=0)
    """Mean arrival rate as a multiple of the fastest server's capacity at width 1.0 (measured on
    the device model, :mod:`hetsched.slim.sim.capacity`); replaces ``rate_per_s`` when given."""
    burst_s: float = Field(0.25, gt=0)
    """Mean length of an ON period of bursty arrivals."""
    burst_factor: float = Field(BURST_RATE_FACTOR, ge=1)
    """Bursty arrivals: the ON rate as a multiple of the mean rate."""
    diurnal_period_s: float = Field(DIURNAL_PERIOD_S, gt=0)
    """Diurnal arrivals: period of the rate's cycle (trough at 0, peak half-way)."""
    diurnal_amplitude: float = Field(DIURNAL_AMPLITUDE, ge=0, lt=1)
    """Diurnal arrivals: the rate swings between ``r (1 - a)`` and ``r (1 + a)``."""
    changes: tuple[RuntimeChange, ...] = ()
    """Runtime changes: servers that slow down or fail during the run (simulated only)."""
    slo_ms: float = Field(float("inf"), gt=0)
    """Latency SLO of every image in milliseconds: its deadline is its arrival plus this
    (infinite: no deadline, as in the paper)."""
    warmup_fraction: float = Field(0.2, ge=0, lt=1)
    """Images arriving in this first fraction of the arrival span are left out of the metrics
    (the steady-state window starts after it)."""
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    """Algorithm 1's knobs of every server's executor (B_max, M_max, U_blk, t_idle, ...)."""
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    """Width choices of the router."""
    group_sizes: tuple[int, ...] = (1, 4, 8, 16)
    """Micro-batch group sizes g the router may choose."""
    decision_time_s: float = Field(0.001, ge=0)
    """Router time per decision (one block placed per interval)."""

    @field_validator("widths", "group_sizes")
    @classmethod
    def _non_empty_positive(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if not values or any(value <= 0 for value in values):
            raise ValueError(f"expected a non-empty list of positive values, got {list(values)}")
        return values

    @model_validator(mode="after")
    def _changes_name_servers(self) -> ScenarioConfig:
        for index, change in enumerate(self.changes):
            if change.server >= len(self.servers):
                raise ValueError(
                    f"changes[{index}].server is {change.server}, but there are only"
                    f" {len(self.servers)} servers"
                )
        return self


def with_overrides(scenario: ScenarioConfig, **updates: Any) -> ScenarioConfig:
    """``scenario`` with the non-None ``updates`` applied and validated again (a rate replaces
    the scenario's load factor).

    Raises:
        ConfigError: Naming a bad field.
    """
    given = {key: value for key, value in updates.items() if value is not None}
    if "rate_per_s" in given:
        given["load_factor"] = None
    return validate_config(
        {**scenario.model_dump(exclude_unset=True), **given}, ScenarioConfig, "command line"
    )


def with_exact_width(scenario: ScenarioConfig, exact_width: bool | None) -> ScenarioConfig:
    """``scenario`` with exact-width execution forced on (True) or off (False: Algorithm 1's
    FINDFREEBESTFIT), or as the scenario sets it (None)."""
    if exact_width is None or exact_width == scenario.executor.exact_width:
        return scenario
    executor = scenario.executor.model_copy(update={"exact_width": exact_width})
    return scenario.model_copy(update={"executor": executor})


class ClusterServers(Protocol):
    """Servers other than the simulated ones, which a scenario's cluster can run on (live)."""

    def open_cluster(
        self, scenario: ScenarioConfig, config: ClusterConfig, oracle: TableAccuracy
    ) -> SlimCluster:
        """A cluster on fresh servers and a fresh clock; ``oracle`` is the simulated world's
        accuracy signal, for the servers to use or to refine (with real outputs)."""

    def image(self, image_id: int) -> Any:
        """The payload workload image ``image_id`` carries (None: nothing to compute on)."""


def accuracy_table(scenario: ScenarioConfig) -> AccuracyTable:
    """The scenario's accuracy table: ``paper`` (Tables I/II) or a measured table's JSON."""
    return load_accuracy_table(scenario.accuracy_table)


@cache
def model_costs(num_classes: int = CIFAR100_CLASSES, image_size: int = 32) -> SegmentCostTable:
    """The analytic SlimResNet cost table (default: CIFAR-100, 32x32 images, 100 classes)."""
    return compute_cost_table(num_classes=num_classes, image_size=image_size)


def scenario_costs(scenario: ScenarioConfig) -> SegmentCostTable:
    """The cost table of the model the scenario serves (its ``num_classes`` and ``image_size``)."""
    return model_costs(scenario.num_classes, scenario.image_size)


def mean_top1(scenario: ScenarioConfig) -> float:
    """Mean top-1 over all width tuples (for the optional centring of p̃_acc)."""
    table = accuracy_table(scenario)
    return float(np.mean([table.lookup(t) for t in product(scenario.widths, repeat=4)]))


def encoder_for(scenario: ScenarioConfig) -> StateEncoder:
    """The state encoder / action decoder for the scenario's servers and action sets."""
    return StateEncoder(len(scenario.servers), scenario.widths, scenario.group_sizes)


def fastest_capacity_per_s(scenario: ScenarioConfig) -> float:
    """Images per second the scenario's fastest server sustains at width 1.0 (device model)."""
    costs = scenario_costs(scenario)
    return max(
        server_capacity_per_s(spec, costs, scenario.executor, 1.0)
        for spec in device_specs(scenario)
    )


def arrival_rate_per_s(scenario: ScenarioConfig) -> float:
    """The mean arrival rate: ``load_factor`` times the fastest capacity, else ``rate_per_s``."""
    if scenario.load_factor is None:
        return scenario.rate_per_s
    return scenario.load_factor * fastest_capacity_per_s(scenario)


def arrival_times_s(scenario: ScenarioConfig, rng: np.random.Generator) -> np.ndarray:
    """The scenario's image arrival times (its rate, process and size; see
    :func:`hetsched.slim.sim.workload.arrival_times_s`)."""
    return draw_arrivals(
        rng,
        arrival_rate_per_s(scenario),
        scenario.arrival,
        count=scenario.num_images,
        burst_s=scenario.burst_s,
        burst_factor=scenario.burst_factor,
        period_s=scenario.diurnal_period_s,
        amplitude=scenario.diurnal_amplitude,
    )


def build_cluster(
    scenario: ScenarioConfig, seed: int, *, live: ClusterServers | None = None
) -> SlimCluster:
    """A fresh cluster with the seed's workload scheduled: simulated, or on ``live``'s servers.

    Both worlds share everything but the servers, the link and the correctness signal: live, the
    servers are greedy executors on the live backend on one real-time loop, arrivals follow the
    same seeded process in wall-clock time, each image carries a real test image, activations
    move in memory, and correctness is the model's real answer (see
    :mod:`hetsched.slim.live.cluster`).

    Raises:
        HetschedError: Unknown devices or links, router widths outside the executors' W, or
            runtime changes on live servers.
    """
    missing = sorted(set(scenario.widths) - set(scenario.executor.widths))
    if missing:
        raise ConfigError(
            f"widths: the router's widths {missing} are not in executor.widths"
            f" {scenario.executor.widths}"
        )
    config = ClusterConfig(
        widths=scenario.widths,
        group_sizes=scenario.group_sizes,
        decision_time_s=scenario.decision_time_s,
        slo_s=scenario.slo_ms / 1e3,
    )
    table = accuracy_table(scenario)
    rng = make_rng(seed)
    difficulty = rng.random(scenario.num_images)
    oracle = TableAccuracy(table, difficulty)
    if live is not None:
        if scenario.changes:
            raise ConfigError("changes: runtime changes are simulated; a live run cannot have them")
        cluster = live.open_cluster(scenario, config, oracle)
        start_s = cluster.clock.now_s()  # the wall clock has moved while the servers were built
        arrivals_s = start_s + arrival_times_s(scenario, rng)
        cluster.schedule_arrivals(arrivals_s.tolist(), live.image)
        return cluster
    specs = device_specs(scenario)
    loop, backends, servers, link = _simulated_servers(scenario, specs)
    completion = completion_model(scenario, specs, link)
    cluster = SlimCluster(servers, loop, link.transfer_time, oracle, config, completion)
    arrivals_s = arrival_times_s(scenario, rng)
    cluster.schedule_arrivals(arrivals_s.tolist())
    schedule_changes(
        scenario.changes, loop, backends, servers, cluster, arrivals_s[0], arrivals_s[-1]
    )
    return cluster


def completion_model(
    scenario: ScenarioConfig, specs: list[DeviceSpec], link: Link
) -> CompletionModel:
    """The router's predictions for the scenario: each server's device model alone, its link."""
    costs = scenario_costs(scenario)
    return CompletionModel(
        [partial(batch_alone_s, spec, costs) for spec in specs],
        link.estimate_s,
        scenario.executor.widths,
        costs.num_segments,
        scenario.executor.max_batch,
    )


def device_specs(scenario: ScenarioConfig) -> list[DeviceSpec]:
    """The device of each server.

    Raises:
        ConfigError: Naming ``servers[i]`` for an unknown device or a bad profile.
    """
    specs = []
    for index, device in enumerate(scenario.servers):
        try:
            specs.append(load_device(device))
        except HetschedError as error:
            raise ConfigError(f"servers[{index}]: {error}") from None
    return specs


def _simulated_servers(
    scenario: ScenarioConfig, specs: list[DeviceSpec]
) -> tuple[EventLoop, list[SimulatedBackend], list[GreedyExecutor], Link]:
    """Simulated devices with greedy executors on them, one event loop, the scenario's link."""
    loop = EventLoop()
    costs = scenario_costs(scenario)
    backends = [
        SimulatedBackend(spec, costs, loop, name=f"{index}:{spec.name}")
        for index, spec in enumerate(specs)
    ]
    servers = [GreedyExecutor(b, loop, scenario.executor, name=b.name) for b in backends]
    return loop, backends, servers, Link(loop, link_config(scenario.link), costs)
