"""``hetsched demo``: the main job end to end on embedded data (what ``make demo`` runs)."""

from __future__ import annotations

from pathlib import Path

import typer

from hetsched.demo import DemoBudget, run_demo

app = typer.Typer(pretty_exceptions_enable=False)


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Folder for every artefact of the demo."),
    data: str = typer.Option("digits:16", help="Training data (see `hetsched slim train`)."),
    epochs: int = typer.Option(6, min=1, help="Training epochs of the SlimResNet."),
    limit: int | None = typer.Option(None, min=1, help="Use only the first N images per split."),
    router_decisions: int = typer.Option(8_000, min=1, help="Training decisions per PPO router."),
    router_images: int = typer.Option(500, min=1, help="Images per routing workload."),
) -> None:
    """Runs the main job end to end on the embedded default data (what `make demo` runs)."""
    run_demo(out, DemoBudget(data, epochs, limit, router_decisions, router_images))
