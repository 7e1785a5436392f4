"""Error types that the CLI turns into one clear line instead of a traceback.

Every error a user can cause (a bad config, trace file, model file, flag or request) is raised as a
subclass of :class:`HetschedError`, with a message that names what is wrong and where.
"""

from __future__ import annotations


class HetschedError(Exception):
    """Base class of user-facing errors; the CLI prints the message and exits with code 2."""


class ConfigError(HetschedError, ValueError):
    """A configuration file or value is invalid; the message names the file and the bad field."""


class DataError(HetschedError, ValueError):
    """A data file (trace, dataset, model file) is missing or malformed.

    Args:
        message: What is wrong.
        path: The file, if any.
        line: The 1-based line number, if the problem is on one line.
        field: The field or column, if the problem is in one field.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = ":".join(str(p) for p in (path, line) if p is not None)
        prefix = f"{where}: " if where else ""
        suffix = f" (field {field!r})" if field else ""
        super().__init__(f"{prefix}{message}{suffix}")


class UnknownNameError(HetschedError, KeyError):
    """A name looked up in a registry does not exist; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])
