"""Result tables for the terminal: rows of dicts as a rich Table, floats to 4 significant digits."""

from __future__ import annotations

from rich.table import Table


def rich_table(title: str, rows: list[dict], columns: list[str]) -> Table:
    """A table of ``columns`` of every row (every row must hold every column)."""
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in columns])
    return table
