"""The ``hetsched`` command line: sub-command groups ``slim``, ``jobs`` and ``tail``.

Each subsystem owns its Typer app in ``hetsched/<subsystem>/cli.py``; heavy imports (torch, ray,
scipy) happen inside the commands, so ``hetsched --help`` stays fast. User errors
(:class:`~hetsched.core.errors.HetschedError`) print one clear line and exit with code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from hetsched.core.errors import HetschedError
from hetsched.jobs.cli import app as jobs_app
from hetsched.slim.cli import app as slim_app
from hetsched.tail.cli import app as tail_app

typer_app = typer.Typer(
    name="hetsched",
    help="Learned, runtime-aware schedulers for deep-learning work on heterogeneous accelerators.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
typer_app.add_typer(slim_app, name="slim", help="Slim Scheduler: slimmable SlimResNet serving.")
typer_app.add_typer(jobs_app, name="jobs", help="RLTune: DL job scheduling on GPU clusters.")
typer_app.add_typer(tail_app, name="tail", help="Tail-latency aware pod placement.")


@typer_app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Folder for every artefact of the demo."),
) -> None:
    """Runs the main job end to end on the embedded default data (what `make demo` runs)."""
    from hetsched.demo import run_demo

    run_demo(out)


def app() -> None:
    """Console-script entry point: runs the CLI and turns user errors into a clean exit 2."""
    try:
        typer_app()
    except HetschedError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        sys.exit(2)
