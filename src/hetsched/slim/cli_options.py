"""Options and option parsing shared by the ``hetsched slim`` command modules.

Typer options and the checks that turn bad command-line values into one-line errors
(:class:`~hetsched.core.errors.ConfigError`) before any work, in one place so that every command
that takes ``--scenario``, ``--images`` or ``--live`` reads them the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from hetsched.core.errors import ConfigError
from hetsched.slim.live.cluster import LiveSetup, open_live_scenario
from hetsched.slim.sim.scenario import ScenarioConfig, with_exact_width, with_overrides
from hetsched.slim.sim.scenario_catalog import load_scenario


def comma_list(option: str, text: str, kind: type[float] | type[int]) -> list:
    """``text`` split at commas into ``kind`` values; a bad item is a one-line error naming
    ``option``."""
    try:
        return [kind(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"{option}: expected comma-separated numbers, got {text!r}") from None


def check_overrides(images: int | None, slo_ms: float | None) -> None:
    """One-line errors for command-line overrides no scenario can take."""
    if images is not None and images < 1:
        raise ConfigError(f"--images: expected at least 1 image, got {images}")
    if slo_ms is not None and slo_ms <= 0:
        raise ConfigError(f"--slo-ms: expected a positive SLO in milliseconds, got {slo_ms:g}")


def scenario_from_options(
    name: str | None,
    images: int | None,
    accuracy_table: str | None,
    rate_per_s: float | None = None,
    slo_ms: float | None = None,
    exact_width: bool | None = None,
) -> ScenarioConfig:
    """A shipped scenario or a YAML file (default: ``paper``) with command-line overrides."""
    if rate_per_s is not None and rate_per_s <= 0:
        raise ConfigError(f"--rate: expected a positive rate in images/s, got {rate_per_s:g}")
    check_overrides(images, slo_ms)
    scenario = with_overrides(
        load_scenario(name or "paper"),
        num_images=images,
        accuracy_table=accuracy_table,
        rate_per_s=rate_per_s,
        slo_ms=slo_ms,
    )
    return with_exact_width(scenario, exact_width)


def live_from_options(
    scenario: ScenarioConfig,
    live: bool,
    checkpoint: Path | None,
    devices: str | None,
    accuracy: str | None,
) -> tuple[ScenarioConfig, LiveSetup | None]:
    """The options of ``--live`` checked and opened (None without it), before any work."""
    if not live:
        if checkpoint is not None or devices is not None:
            raise ConfigError("--checkpoint and --live-devices only apply with --live")
        return scenario, None
    if checkpoint is None:
        raise ConfigError(
            "--live needs --checkpoint CKPT: the live backend runs a trained SlimResNet"
            " (written by `hetsched slim train`)"
        )
    device_names = None if devices is None else names(devices)
    return open_live_scenario(
        scenario, checkpoint, device_names, accuracy_table_given=accuracy is not None
    )


SCENARIO_OPT = typer.Option(
    None,
    "--scenario",
    help="A shipped scenario (hetsched slim scenarios) or a scenario YAML (default: paper).",
)
IMAGES_OPT = typer.Option(None, "--images", help="Images per workload (episode).")
ACCURACY_OPT = typer.Option(
    None, "--accuracy-table", help="'paper' (Tables I/II) or a measured accuracy-table JSON."
)
RATE_OPT = typer.Option(
    None, "--rate", help="Mean arrival rate in images/s (live: what the devices can serve)."
)
SLO_OPT = typer.Option(
    None, "--slo-ms", help="Latency SLO of every image in ms (default: the scenario's)."
)
EXACT_WIDTH_OPT = typer.Option(
    None,
    "--exact-width/--free-best-fit",
    help="Run each request at exactly its routed width, or by the paper's FINDFREEBESTFIT (a"
    " wider free instance may run it); default: as the scenario says (`hetsched slim"
    " scenarios`: exact width on every shipped one but paper).",
)
CHECKPOINT_OPT = typer.Option(
    None, "--checkpoint", help="With --live: the SlimResNet checkpoint the servers run."
)
LIVE_DEVICES_OPT = typer.Option(
    None,
    "--live-devices",
    help="With --live: comma-separated devices, one per server (cpu, cuda:N); default: one per"
    " CUDA device, else the scenario's server count on cpu.",
)


def names(text: str) -> list[str]:
    """Comma-separated names, blanks dropped; commas inside parentheses belong to a router
    spec's settings (``backlog-width(wide=1.0,threshold_s=0.008)``)."""
    return [name.strip() for name in re.split(r",(?![^(]*\))", text) if name.strip()]
