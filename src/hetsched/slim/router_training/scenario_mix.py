"""The distribution of scenarios a learned router trains on: named scenarios, randomised.

A router trained on one workload learns that workload. Issue 19 asks for training "over a
distribution of scenarios (randomised load, burstiness, link, server speeds)" and for scenarios
marked ``held_out`` never to be seen. Each training episode draws one of the (non-held-out) named
scenarios and perturbs it, all from the episode's seed:

* **load**: the mean arrival rate times U(0.7, 1.3);
* **burstiness**: bursty arrivals get their burst factor times U(0.5, 1.5) (at least 1) and their
  ON period times U(0.5, 2);
* **link**: switched-Ethernet scenarios draw 1 or 10 GbE (a shared Wi-Fi scenario keeps Wi-Fi:
  moving activations is what it tests);
* **server speed**: with probability 1/2 one random server computes U(1, 2.5) times slower
  for the whole episode (a co-tenant), on top of the scenario's own runtime changes.

Validation episodes are the named scenarios as they are, on seeds no training episode uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hetsched.core.errors import ConfigError
from hetsched.core.seeding import make_rng
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.routers.slo_features import AdviceEncoder, SloEncoder
from hetsched.slim.routers.specs import parse_router_spec
from hetsched.slim.sim.runtime_changes import RuntimeChange
from hetsched.slim.sim.scenario import (
    ScenarioConfig,
    build_cluster,
    with_exact_width,
    with_overrides,
)
from hetsched.slim.sim.scenario_catalog import load_scenario, scenario_names

ETHERNET_LINKS = ("ethernet-1g", "ethernet-10g")
ACTION_KINDS = ("placement", "advice")
"""The learned router's action heads: joint (server, width) x group, or which advisor to follow."""
"""The links a switched-Ethernet scenario may be drawn with."""

VALIDATION_SEED = 900_000
"""Validation episodes use seeds from here on; training episodes draw seeds below it."""


def training_scenario_names() -> list[str]:
    """Every shipped scenario not marked ``held_out``."""
    return [name for name in scenario_names() if not load_scenario(name).held_out]


@dataclass(frozen=True)
class ScenarioMix:
    """Named training scenarios, each episode a randomised variant of one of them.

    Args:
        scenarios: Name -> scenario (none may be held out).
        images: Images per training or validation episode (shorter than the named scenarios'
            evaluation runs, so an episode of each kind comes round often).
        randomize: Perturb training episodes (see the module docstring); False replays the named
            scenarios with fresh workloads.

    Raises:
        ConfigError: For an empty mix or a held-out scenario in it.
    """

    scenarios: dict[str, ScenarioConfig]
    images: int = 1000
    randomize: bool = True

    def __post_init__(self) -> None:
        if not self.scenarios:
            raise ConfigError("scenarios: name at least one training scenario")
        held_out = [name for name, scenario in self.scenarios.items() if scenario.held_out]
        if held_out:
            raise ConfigError(
                f"scenarios: {', '.join(held_out)} held out: never trained on (evaluate on it)"
            )
        if self.images < 1:
            raise ConfigError(f"images: expected at least 1 image per episode, got {self.images}")

    @property
    def names(self) -> list[str]:
        """The scenario names, in order."""
        return list(self.scenarios)

    @property
    def max_servers(self) -> int:
        """The most servers any scenario of the mix has."""
        return max(len(scenario.servers) for scenario in self.scenarios.values())

    def draw(self, seed: int) -> tuple[str, ScenarioConfig]:
        """The training episode of ``seed``: which scenario, and its randomised variant."""
        rng = make_rng(seed)
        name = self.names[int(rng.integers(len(self.scenarios)))]
        scenario = self.scenarios[name]
        updates: dict[str, Any] = {"num_images": self.images}
        if self.randomize:
            updates.update(_perturbation(scenario, rng))
        return name, scenario.model_copy(update=updates)

    def scenario(self, seed: int) -> ScenarioConfig:
        """The scenario training episode ``seed`` runs (seeds are taken modulo
        :data:`VALIDATION_SEED`, so no training episode replays a validation one)."""
        return self.draw(seed % VALIDATION_SEED)[1]

    def cluster(self, seed: int) -> SlimCluster:
        """A fresh cluster for training episode ``seed`` (its workload drawn from the seed)."""
        return build_cluster(self.scenario(seed), seed % VALIDATION_SEED)

    def validation_episodes(
        self, per_scenario: int, images: int | None = None
    ) -> list[tuple[str, ScenarioConfig, int]]:
        """(name, scenario, seed) of ``per_scenario`` unperturbed episodes of every scenario, of
        ``images`` images each (None: each scenario's own length, as the evaluation runs it)."""
        return [
            (name, scenario.model_copy(update={"num_images": images or scenario.num_images}),
             VALIDATION_SEED + k)
            for name, scenario in self.scenarios.items()
            for k in range(per_scenario)
        ]  # fmt: skip


def training_mix(
    names: Sequence[str],
    images: int,
    randomize: bool = True,
    exact_width: bool | None = None,
    accuracy_table: str | None = None,
) -> ScenarioMix:
    """The mix of the named scenarios (none named: every shipped one not held out), each run
    with exact widths or by FINDFREEBESTFIT as ``exact_width`` says, and with the accuracy table
    ``accuracy_table`` (None for either: as its file says).

    Raises:
        HetschedError: For an unknown or held-out scenario, or an unreadable accuracy table.
    """
    chosen = list(names) or training_scenario_names()
    scenarios = {name: with_exact_width(load_scenario(name), exact_width) for name in chosen}
    if accuracy_table is not None:
        scenarios = {
            name: with_overrides(scenario, accuracy_table=accuracy_table)
            for name, scenario in scenarios.items()
        }
    return ScenarioMix(scenarios, images, randomize)


def mix_encoder(mix: ScenarioMix, advisors: Sequence[str], action: str = "placement") -> SloEncoder:
    """The extended encoder for every scenario of ``mix`` (as many server slots as the largest),
    with the joint (server, width) head (``action="placement"``) or the advisor-choice head
    (``"advice"``, :class:`~hetsched.slim.routers.slo_features.AdviceEncoder`).

    Raises:
        ConfigError: If the scenarios differ in widths or group sizes.
        UnknownNameError: For an advisor that is not a registered router.
    """
    first_name, first = next(iter(mix.scenarios.items()))
    for name, scenario in mix.scenarios.items():
        if (scenario.widths, scenario.group_sizes) != (first.widths, first.group_sizes):
            raise ConfigError(
                f"scenarios: {name} has other widths or group sizes than {first_name}"
            )
    for advisor in advisors:
        parse_router_spec(advisor)  # an unknown name fails here, listing the known ones
    if action not in ACTION_KINDS:
        raise ConfigError(f"action: expected one of {', '.join(ACTION_KINDS)}, got {action!r}")
    extended = SloEncoder if action == "placement" else AdviceEncoder
    return extended(mix.max_servers, first.widths, first.group_sizes, tuple(advisors))


def _perturbation(scenario: ScenarioConfig, rng: Any) -> dict[str, Any]:
    """Field updates of one randomised variant of ``scenario`` (see the module docstring)."""
    updates: dict[str, Any] = {}
    scale = float(rng.uniform(0.7, 1.3))
    if scenario.load_factor is not None:
        updates["load_factor"] = scenario.load_factor * scale
    else:
        updates["rate_per_s"] = scenario.rate_per_s * scale
    if scenario.arrival == "bursty":
        updates["burst_factor"] = max(1.0, scenario.burst_factor * float(rng.uniform(0.5, 1.5)))
        updates["burst_s"] = scenario.burst_s * float(rng.uniform(0.5, 2.0))
    if scenario.link in ETHERNET_LINKS:
        updates["link"] = ETHERNET_LINKS[int(rng.integers(len(ETHERNET_LINKS)))]
    if rng.random() < 0.5:
        slow = RuntimeChange(
            kind="slowdown",
            server=int(rng.integers(len(scenario.servers))),
            start_fraction=0.0,
            factor=float(rng.uniform(1.0, 2.5)),
        )
        updates["changes"] = (*scenario.changes, slow)
    return updates
