"""`hetsched slim` sub-commands: options in, library calls, results printed.

The commands live in one module per concern and register themselves here, in ``--help`` order:
the router and its evaluation (:mod:`hetsched.slim.cli_router`), the model and one server's
executor (:mod:`hetsched.slim.cli_model`), HTTP serving (:mod:`hetsched.slim.serving.cli`).
"""

from __future__ import annotations

import typer

from hetsched.slim import cli_model, cli_router
from hetsched.slim.serving.cli import register as register_serving

app = typer.Typer(no_args_is_help=True)
cli_router.register(app)
cli_model.register(app)
register_serving(app)
