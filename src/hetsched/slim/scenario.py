"""The paper's 3-GPU scenario (and variants) as one config, built into a runnable cluster.

Defaults reproduce the setup of the Slim Scheduler paper's section IV.4: two RTX 2080 Ti and one
GTX 980 Ti servers, each running the greedy executor (Algorithm 1) on the simulated backend,
activations moving over a Wi-Fi 5 link, bursty arrivals, the paper's accuracy table (Tables I/II
with nearest-neighbour lookup). ``live=True`` builds the same cluster on the live backend with
whatever devices exist here.

Until the executor issue's modules land, servers, link and accuracy table come from
:mod:`hetsched.slim.standin` (see there).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Literal

import numpy as np
from pydantic import Field

from hetsched.core.config import StrictModel
from hetsched.core.errors import ConfigError, HetschedError
from hetsched.core.events import EventLoop
from hetsched.core.seeding import make_rng
from hetsched.slim.cluster import ClusterConfig, SlimCluster
from hetsched.slim.routers.ppo import StateEncoder
from hetsched.slim.standin import (
    DEVICE_MODELS,
    LINK_PRESETS,
    PaperAccuracyTable,
    QueueingServer,
)


class ScenarioConfig(StrictModel, use_attribute_docstrings=True):
    """Everything that defines a routing workload; every field has the paper's setup as default."""

    servers: tuple[str, ...] = ("rtx-2080-ti", "rtx-2080-ti", "gtx-980-ti")
    """Device of each server (names from ``hetsched.core.devices``)."""
    link: str = "wifi5"
    """Network preset between servers (``hetsched.slim.network``)."""
    accuracy_table: str = "paper"
    """``paper`` (Tables I/II, nearest neighbour) or the path of a measured accuracy table."""
    num_images: int = Field(1000, ge=1)
    """Images per workload (one episode / one evaluation run)."""
    arrival: Literal["bursty", "poisson"] = "bursty"
    """Arrival process of images."""
    rate_per_s: float = Field(400.0, gt=0)
    """Mean arrival rate r in images per second."""
    burst_s: float = Field(0.25, gt=0)
    """Mean length of an ON period of bursty arrivals."""
    max_batch: int = Field(16, ge=1)
    """B_max of each server's executor."""
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    """Width choices of the router."""
    group_sizes: tuple[int, ...] = (1, 4, 8, 16)
    """Micro-batch group sizes g the router may choose."""
    decision_time_s: float = Field(0.001, ge=0)
    """Router time per decision (one block placed per interval)."""


class TableAccuracy:
    """Accuracy prior and per-image correctness from an accuracy table (the reward's p̃_acc).

    The prior of a width prefix is the table's nearest-neighbour lookup (the paper's fallback). For
    correctness, a measured table answers per image; the paper's table has only top-1 figures, so
    each image gets a fixed difficulty u ~ U(0, 1) and counts as correct when u < top-1 of its
    width tuple: an image right at a slim width stays right at a wider one, the fraction correct
    matches the table in expectation, and every policy run on a seed sees the same difficulties.
    """

    def __init__(self, table: object, difficulty: np.ndarray) -> None:
        self.table = table
        self._difficulty = difficulty

    def prior(self, widths: Sequence[float]) -> float:
        return float(self.table.lookup(tuple(widths)))

    def correct(self, widths: Sequence[float], image_index: int) -> bool:
        measured = self.table.correct(tuple(widths), image_index)
        if measured is not None:
            return bool(measured)
        return bool(self._difficulty[image_index] < self.prior(widths))


def accuracy_table(scenario: ScenarioConfig) -> PaperAccuracyTable:
    """The scenario's accuracy table (``paper``: Tables I/II with nearest-neighbour lookup)."""
    if scenario.accuracy_table != "paper":
        raise ConfigError(
            f"accuracy_table {scenario.accuracy_table!r}: only 'paper' is available until the"
            " model issue's measured tables (hetsched.slim.accuracy) land"
        )
    return PaperAccuracyTable()


def mean_top1(scenario: ScenarioConfig) -> float:
    """Mean top-1 over all width tuples (for the optional centring of p̃_acc)."""
    table = accuracy_table(scenario)
    return float(np.mean([table.lookup(t) for t in product(scenario.widths, repeat=4)]))


def encoder_for(scenario: ScenarioConfig) -> StateEncoder:
    """The state encoder / action decoder for the scenario's servers and action sets."""
    return StateEncoder(len(scenario.servers), scenario.widths, scenario.group_sizes)


def arrival_times_s(scenario: ScenarioConfig, rng: np.random.Generator) -> np.ndarray:
    """Image arrival times at mean rate r: Poisson, or bursty on/off.

    Bursty: ON periods (exponential, mean ``burst_s``) at three times the mean rate alternate with
    silent OFF periods twice as long on average, so the long-run rate stays r.
    """
    n, rate = scenario.num_images, scenario.rate_per_s
    if scenario.arrival == "poisson":
        return np.cumsum(rng.exponential(1.0 / rate, n))
    times: list[float] = []
    now_s = 0.0
    while len(times) < n:
        on_s = rng.exponential(scenario.burst_s)
        count = rng.poisson(3.0 * rate * on_s)
        times.extend(np.sort(now_s + rng.uniform(0.0, on_s, count)).tolist())
        now_s += on_s + rng.exponential(2.0 * scenario.burst_s)
    return np.asarray(times[:n])


def build_cluster(scenario: ScenarioConfig, seed: int, *, live: bool = False) -> SlimCluster:
    """A fresh simulated cluster with the seed's workload scheduled.

    Raises:
        HetschedError: For ``live=True`` (the live backend is the executor issue's) or unknown
            devices / links.
    """
    if live:
        raise HetschedError(
            "--live needs the executor issue's live backend (hetsched.slim.backends),"
            " which is not in this checkout yet"
        )
    rng = make_rng(seed)
    loop = EventLoop()
    unknown = [d for d in scenario.servers if d not in DEVICE_MODELS]
    if unknown:
        raise ConfigError(f"servers: unknown device(s) {unknown}; known: {sorted(DEVICE_MODELS)}")
    if scenario.link not in LINK_PRESETS:
        raise ConfigError(f"link: unknown preset {scenario.link!r}; known: {sorted(LINK_PRESETS)}")
    servers = [
        QueueingServer(loop, f"{i}:{device}", DEVICE_MODELS[device], scenario.max_batch)
        for i, device in enumerate(scenario.servers)
    ]
    link = LINK_PRESETS[scenario.link](loop)
    cluster = SlimCluster(
        servers,
        loop,
        link.transfer_time,
        TableAccuracy(accuracy_table(scenario), rng.random(scenario.num_images)),
        ClusterConfig(
            widths=scenario.widths,
            group_sizes=scenario.group_sizes,
            decision_time_s=scenario.decision_time_s,
        ),
    )
    cluster.schedule_arrivals(arrival_times_s(scenario, rng).tolist())
    return cluster
