"""Every router on every named scenario, over seeds: the issue 19 evaluation as one function.

For each scenario and each router in the registry (:data:`hetsched.slim.routers.ROUTERS`), each
seed's workload is run in the simulated cluster and measured on its steady-state window
(:mod:`hetsched.slim.experiments.slo_metrics`); the seeds are reduced to mean ± 95 % CI, printed
as one table per scenario (held-out scenarios marked), and saved as ``results.json``,
``results.csv`` and one Pareto plot (accuracy against SLO attainment) per scenario.

A learned router (one whose constructor takes a ``checkpoint``) runs with the checkpoint given
for it, else with the one shipped in the package (``learned``); a router with neither (``ppo``,
trained per experiment) is listed as skipped, with the reason, so a table never silently lacks
it.

Given a :class:`~hetsched.slim.live.cluster.LiveSetup` per scenario, the same comparison runs on
the live backend (issue 19, item 6): the servers run the model on real devices in wall-clock
time, the routers and the metrics are the same objects.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from hetsched.core.errors import ConfigError, HetschedError
from hetsched.slim.experiments.report import results_console
from hetsched.slim.experiments.scenario_report import (
    RouterResult,
    ScenarioResult,
    plot_pareto,
    scenario_table,
    write_csv,
)
from hetsched.slim.experiments.slo_metrics import (
    EnergyProbe,
    WindowMetrics,
    window_metrics,
)
from hetsched.slim.live.cluster import LiveSetup
from hetsched.slim.routers import ROUTERS, Router
from hetsched.slim.routers.specs import create_router, parse_router_spec
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster
from hetsched.slim.sim.workload import window_bounds

RouterFactory = Callable[[int], Router]
"""seed -> a fresh router (one per run, so a router's own random draws are seeded too)."""


def evaluate_window(
    scenario: ScenarioConfig, router: Router, seed: int, live: LiveSetup | None = None
) -> WindowMetrics:
    """Runs ``router`` on the scenario's workload for ``seed``; its steady-state SLO metrics.

    With ``live`` the cluster's servers run the model on real devices in wall-clock time.
    """
    cluster = build_cluster(scenario, seed, live=live)
    start_s, end_s = window_bounds(cluster.arrival_times_s, scenario.warmup_fraction)
    probe = EnergyProbe(cluster, start_s, end_s)
    cluster.run(router)
    return window_metrics(cluster, probe, start_s, end_s)


def needs_checkpoint(name: str) -> bool:
    """Whether the registered router ``name`` is a learned one (its constructor takes a
    ``checkpoint``) that the package ships no trained checkpoint for."""
    router_class = ROUTERS.get(name)
    takes_checkpoint = "checkpoint" in inspect.signature(router_class).parameters
    return takes_checkpoint and getattr(router_class, "shipped", None) is None


def experiment_routers(
    names: list[str] | None, checkpoints: dict[str, Path]
) -> tuple[dict[str, RouterFactory], dict[str, str]]:
    """The routers to evaluate (default: all registered) and those skipped, with why.

    Args:
        names: Registry names or router specs (``backlog-width(threshold_s=0.012)``: a rule
            with settings) to evaluate, or None for every registered router.
        checkpoints: Checkpoint file per learned router name.

    Raises:
        HetschedError: For an empty list, an unknown router name or a bad setting, a checkpoint
            for a router that is not in the list, or a checkpoint file that does not exist or is
            not a router checkpoint.
    """
    if names is not None and not names:
        raise ConfigError("--routers: no router named (give one or more, comma-separated)")
    chosen = names if names is not None else ROUTERS.names()
    for spec in chosen:
        parse_router_spec(spec)  # an unknown name or a bad setting fails here
    for name in checkpoints:
        ROUTERS.get(name)  # an unknown name fails here, listing the known ones
    extra = sorted(set(checkpoints) - set(chosen))
    if extra:
        raise ConfigError(f"--router-checkpoint: {', '.join(extra)} not among the routers run")
    missing = [f"{name}={path}" for name, path in checkpoints.items() if not path.is_file()]
    if missing:
        raise ConfigError(f"--router-checkpoint: no such file: {', '.join(missing)}")
    for name, path in checkpoints.items():
        _create(name, {"checkpoint": path}, 0)  # a foreign or corrupt file fails here, once
    factories: dict[str, RouterFactory] = {}
    skipped: dict[str, str] = {}
    for name in chosen:
        if name in checkpoints:
            factories[name] = partial(_create, name, {"checkpoint": checkpoints[name]})
        elif needs_checkpoint(parse_router_spec(name)[0]):
            skipped[name] = f"learned router: give --router-checkpoint {name}=PATH to run it"
        else:
            factories[name] = partial(create_router, name)
    return factories, skipped


def _create(name: str, options: dict[str, Any], seed: int) -> Router:
    """A fresh router ``name`` seeded with ``seed``, built with ``options`` (a checkpoint)."""
    router: Router = ROUTERS.create(name, seed=seed, **options)
    return router


def run_scenario_experiment(
    scenarios: dict[str, ScenarioConfig],
    seeds: list[int],
    out_dir: Path,
    routers: dict[str, RouterFactory],
    skipped: dict[str, str] | None = None,
    *,
    console: Console | None = None,
    progress: bool = True,
    live: dict[str, LiveSetup] | None = None,
) -> list[ScenarioResult]:
    """Evaluates every router on every scenario and seed; prints, saves JSON/CSV and plots.

    A router that cannot route a scenario (a checkpoint trained for another number of servers)
    is skipped there with the reason, not a crash of the whole evaluation. ``live`` (one setup
    per scenario name) runs every scenario on the live backend instead of the simulator.
    """
    console = console or results_console()
    for name, setup in (live or {}).items():
        console.print(f"{name}: {setup.describe()}", highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    total = len(scenarios) * len(routers) * len(seeds)
    with Progress(console=console, disable=not progress, transient=True) as bar:
        task = bar.add_task("evaluating", total=total)
        for name, scenario in scenarios.items():
            result = ScenarioResult(name, scenario.held_out, scenario.description)
            servers = None if live is None else live[name]
            result.skipped.update(skipped or {})
            for router_name, make_router in routers.items():
                bar.update(task, description=f"{name}: {router_name}")
                runs = RouterResult(router_name)
                try:
                    for seed in seeds:
                        run = evaluate_window(scenario, make_router(seed), seed, servers)
                        runs.runs.append(run)
                        bar.advance(task)
                except (HetschedError, ValueError) as error:
                    result.skipped[router_name] = f"cannot route this scenario: {error}"
                    bar.advance(task, len(seeds) - len(runs.runs))
                    continue
                result.routers[router_name] = runs
            results.append(result)
    for result in results:
        console.print(scenario_table(result))
        for router_name, reason in result.skipped.items():
            console.print(f"  skipped {router_name}: {reason}", highlight=False)
        plot_pareto(result, out_dir / f"pareto-{result.scenario}.png")
    document = {
        "seeds": seeds,
        "backend": "simulated" if live is None else "live",
        "live": {name: setup.describe() for name, setup in (live or {}).items()},
        "scenarios": {name: scenario.model_dump() for name, scenario in scenarios.items()},
        "results": [result.as_dict() for result in results],
    }
    (out_dir / "results.json").write_text(json.dumps(document, indent=1))
    write_csv(results, out_dir / "results.csv")
    for name, setup in (live or {}).items():
        console.print(f"{name}: {setup.energy_note()}", highlight=False)
    console.print(
        f"results: {out_dir / 'results.json'}, {out_dir / 'results.csv'};"
        f" Pareto plots: {out_dir}/pareto-*.png"
    )
    return results
