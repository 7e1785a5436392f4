"""The ``hetsched`` command line: sub-command groups ``slim``, ``jobs``, ``tail`` and ``demo``.

Each subsystem owns its Typer app (``hetsched/<subsystem>/cli.py``). Those apps import torch,
scipy and friends at module level (about 2 s), so the root group imports a subsystem's CLI only
when one of its commands runs: ``hetsched --help`` lists the subsystems from the table below
without loading any of them. User errors (:class:`~hetsched.core.errors.HetschedError`) print one
clear line and exit with code 2.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup

from hetsched import __version__
from hetsched.core.entry import run_reporting_user_errors


@dataclass(frozen=True)
class Subsystem:
    """Where a sub-command's Typer ``app`` lives, and the one line ``--help`` shows for it."""

    module: str
    help: str


SUBSYSTEMS: dict[str, Subsystem] = {
    "slim": Subsystem("hetsched.slim.cli", "Slim Scheduler: slimmable SlimResNet serving."),
    "jobs": Subsystem("hetsched.jobs.cli", "RLTune: DL job scheduling on GPU clusters."),
    "tail": Subsystem("hetsched.tail.cli", "Tail-latency aware pod placement."),
    "demo": Subsystem(
        "hetsched.demo_cli",
        "Runs the main job end to end on the embedded default data (what `make demo` runs).",
    ),
}


COMPLETION_PARAMS = frozenset({"install_completion", "show_completion"})


class LazySubsystemGroup(TyperGroup):
    """The root group: resolves a subsystem's commands on first use, not at start-up."""

    listing_help = False
    """True while the root help is drawn: sub-commands then answer with their help line only."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *SUBSYSTEMS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        subsystem = SUBSYSTEMS.get(cmd_name)
        if subsystem is None:
            return super().get_command(ctx, cmd_name)
        if self.listing_help:
            return TyperGroup(name=cmd_name, help=subsystem.help)
        command = typer.main.get_command(importlib.import_module(subsystem.module).app)
        command.name = cmd_name
        # Completion is installed from the root; Typer would add its options to every sub-app.
        command.params = [p for p in command.params if p.name not in COMPLETION_PARAMS]
        command.help = command.help or subsystem.help
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing_help = False


typer_app = typer.Typer(
    name="hetsched",
    cls=LazySubsystemGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"hetsched {__version__}")
        raise typer.Exit()


@typer_app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Learned, runtime-aware schedulers for deep-learning work on heterogeneous accelerators."""


def app() -> None:
    """Console-script entry point: runs the CLI and turns user errors into a clean exit 2."""
    run_reporting_user_errors(typer_app)
