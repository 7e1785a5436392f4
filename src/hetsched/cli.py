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
    data: str = typer.Option("digits:16", help="Training data (see `hetsched slim train`)."),
    epochs: int = typer.Option(6, min=1, help="Training epochs of the SlimResNet."),
    limit: int | None = typer.Option(None, min=1, help="Use only the first N images per split."),
    router_decisions: int = typer.Option(8_000, min=1, help="Training decisions per PPO router."),
    router_images: int = typer.Option(500, min=1, help="Images per routing workload."),
) -> None:
    """Runs the main job end to end on the embedded default data (what `make demo` runs)."""
    from hetsched.demo import DemoBudget, run_demo

    run_demo(out, DemoBudget(data, epochs, limit, router_decisions, router_images))


def app() -> None:
    """Console-script entry point: runs the CLI and turns user errors into a clean exit 2."""
    try:
        typer_app()
    except HetschedError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        sys.exit(2)
