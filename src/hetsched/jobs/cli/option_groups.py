"""Option groups for the ``hetsched jobs`` Typer commands.

Typer maps one function parameter to one flag, so commands that take the same data flags would
each repeat the whole list and then pass it on argument by argument. Here a frozen dataclass whose
fields are ``Annotated`` Typer options stands for such a list: a command takes one parameter typed
with the dataclass, and :func:`option_group` shows Typer the dataclass's fields in that
parameter's place (same flags, defaults, help and order as if written out) and hands the command
one instance built from them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from copy import copy
from typing import Annotated, Any, TypeVar

from typer.models import OptionInfo

Result = TypeVar("Result")

#: Help of every command's trace option (a file in any format, or a sample shipped in the package).
TRACE_HELP = "Trace file (or PAI 2020 folder), or sample:NAME (e.g. sample:alibaba2023)."


def option_group(
    parameter: str, **help_overrides: str
) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Expands a command's dataclass-typed parameter into the dataclass's Typer options.

    Apply it below ``@app.command``: Typer reads the rewritten signature, and the command still
    receives one dataclass instance, so a group of flags is declared (and its values consumed)
    in one place however many commands take it.

    Args:
        parameter: Name of the command's parameter annotated with the options dataclass.
        **help_overrides: Help text per field for this command, where the shared text would not
            say what the flag means here.

    Returns:
        A decorator for the command function.

    Raises:
        TypeError: When ``parameter`` is not a dataclass-typed parameter or an override names no
            field: a programming error, caught when the CLI module is imported.
    """

    def decorate(command: Callable[..., Result]) -> Callable[..., Result]:
        signature = inspect.signature(command, eval_str=True)
        group = signature.parameters[parameter].annotation
        if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
            raise TypeError(f"{command.__name__}({parameter}) is not typed with a dataclass")
        names = [field.name for field in dataclasses.fields(group)]
        unknown = help_overrides.keys() - set(names)
        if unknown:
            raise TypeError(f"help overrides for unknown options: {sorted(unknown)}")
        hints = typing.get_type_hints(group, include_extras=True)
        kind = signature.parameters[parameter].kind
        fields = [
            inspect.Parameter(
                field.name,
                kind,
                default=field.default,
                annotation=_with_help(hints[field.name], help_overrides.get(field.name)),
            )
            for field in dataclasses.fields(group)
        ]
        params = list(signature.parameters.values())
        at = params.index(signature.parameters[parameter])
        params[at : at + 1] = fields

        @functools.wraps(command)
        def run(**kwargs: Any) -> Result:
            options = group(**{name: kwargs.pop(name) for name in names})
            return command(**kwargs, **{parameter: options})

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        # Typer also calls get_type_hints(); keep the hints in step with the signature.
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


def _with_help(hint: Any, text: str | None) -> Any:
    """``hint`` (``Annotated[T, typer.Option(...)]``) with the option's help set to ``text``."""
    if text is None:
        return hint
    base, *metadata = typing.get_args(hint)
    infos = [copy(item) if isinstance(item, OptionInfo) else item for item in metadata]
    for info in infos:
        if isinstance(info, OptionInfo):
            info.help = text
    return Annotated[(base, *infos)]
