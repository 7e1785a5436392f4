"""How every entry point (the ``hetsched`` CLI, the benchmark scripts) ends on a user error.

A :class:`~hetsched.core.errors.HetschedError` is the user's to fix (a bad option, file or
device), so it is one red line on stderr and exit status 2, never a traceback; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from hetsched.core.errors import HetschedError


def run_reporting_user_errors(main: Callable[[], object]) -> None:
    """Calls ``main``; a user error prints ``error: <message>`` and exits with status 2."""
    try:
        main()
    except HetschedError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        sys.exit(2)
