"""The named scenarios shipped with hetsched: YAML files in ``hetsched/slim/sim/scenarios``.

Each file is a :class:`~hetsched.slim.sim.scenario.ScenarioConfig` validated strictly (a misspelt
field is an error naming it). ``paper`` reproduces the Slim Scheduler paper's setup; the others
are where scheduling matters: four unequal servers, LAN links, sustained and bursty overload, a
diurnal ramp, a server that slows down and one that fails. Scenarios tagged ``held_out`` are never
used to train a router. Wherever a scenario is asked for by name, a path to a YAML file works too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from hetsched.core.config import load_config, validate_config
from hetsched.core.errors import ConfigError, UnknownNameError
from hetsched.slim.sim.capacity import server_capacity_per_s
from hetsched.slim.sim.scenario import (
    ScenarioConfig,
    arrival_rate_per_s,
    device_specs,
    scenario_costs,
)

SCENARIO_FOLDER = "scenarios"
"""Folder of the YAML files inside ``hetsched.slim.sim``."""


def scenario_names() -> list[str]:
    """Names of the shipped scenarios, ``paper`` first, the rest alphabetically."""
    folder = resources.files("hetsched.slim.sim").joinpath(SCENARIO_FOLDER)
    names = sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    return sorted(names, key=lambda name: name != "paper")


def load_scenario(name_or_path: str) -> ScenarioConfig:
    """A shipped scenario by name, or a scenario YAML file.

    Raises:
        UnknownNameError: For a name that is neither shipped nor an existing file.
        ConfigError: For a file with a bad field (named).
    """
    if name_or_path in scenario_names():
        resource = resources.files("hetsched.slim.sim").joinpath(
            f"{SCENARIO_FOLDER}/{name_or_path}.yaml"
        )
        try:
            data = yaml.safe_load(resource.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise ConfigError(f"scenario {name_or_path}: not valid YAML: {error}") from None
        return validate_config(data, ScenarioConfig, source=f"scenario {name_or_path}")
    path = Path(name_or_path)
    if not path.is_file():
        raise UnknownNameError(
            f"unknown scenario {name_or_path!r}; known: {', '.join(scenario_names())}"
            " (or a scenario .yaml file)"
        )
    return load_config(path, ScenarioConfig)


def load_scenarios(names: list[str]) -> dict[str, ScenarioConfig]:
    """Several scenarios by name or path, keyed by name (a file by its stem).

    Raises:
        ConfigError: For an empty list or a name given twice.
    """
    if not names:
        raise ConfigError("--scenarios: name at least one scenario")
    keys = [Path(name).stem if name.endswith((".yaml", ".yml")) else name for name in names]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--scenarios: a scenario is named twice in {', '.join(names)}")
    return {key: load_scenario(name) for key, name in zip(keys, names, strict=True)}


@dataclass(frozen=True)
class ScenarioSummary:
    """One scenario in figures: what ``hetsched slim scenarios`` prints."""

    name: str
    description: str
    held_out: bool
    servers: tuple[str, ...]
    link: str
    arrival: str
    rate_per_s: float
    """Mean arrival rate (images/s)."""
    fastest_capacity_per_s: float
    """The fastest server's capacity at width 1.0 (images/s, device model)."""
    cluster_capacity_per_s: float
    """The sum of every server's capacity at width 1.0 (images/s)."""
    slo_ms: float
    changes: int
    exact_width: bool = False
    """Requests run at exactly their routed width (else Algorithm 1's FINDFREEBESTFIT)."""

    @property
    def load_vs_fastest(self) -> float:
        """The mean rate as a multiple of the fastest server's capacity."""
        return self.rate_per_s / self.fastest_capacity_per_s

    def line(self) -> str:
        """The scenario on one line: use, load against capacities, servers, link, SLO, story."""
        counts = Counter(self.servers)
        servers = ", ".join(f"{n}x {d}" if n > 1 else d for d, n in counts.items())
        changes = f", {self.changes} runtime change(s)" if self.changes else ""
        fit = "exact width" if self.exact_width else "free best fit"
        return (
            f"{self.name:<12} {'held-out' if self.held_out else 'train':<8}"
            f" {self.rate_per_s:>6.0f} img/s = {self.load_vs_fastest:.2f}x the fastest server"
            f" ({self.fastest_capacity_per_s:.0f} img/s at width 1.0; all servers"
            f" {self.cluster_capacity_per_s:.0f}); {servers}; {self.link}; {self.arrival};"
            f" {fit}; SLO {self.slo_ms:g} ms{changes}: {self.description}"
        )


def summarize_scenario(name: str, scenario: ScenarioConfig) -> ScenarioSummary:
    """Rates and capacities of a scenario, computed from the device model."""
    costs = scenario_costs(scenario)
    capacities = [
        server_capacity_per_s(spec, costs, scenario.executor, 1.0)
        for spec in device_specs(scenario)
    ]
    return ScenarioSummary(
        name=name,
        description=scenario.description,
        held_out=scenario.held_out,
        servers=scenario.servers,
        link=scenario.link,
        arrival=scenario.arrival,
        rate_per_s=arrival_rate_per_s(scenario),
        fastest_capacity_per_s=max(capacities),
        cluster_capacity_per_s=sum(capacities),
        slo_ms=scenario.slo_ms,
        changes=len(scenario.changes),
        exact_width=scenario.executor.exact_width,
    )
