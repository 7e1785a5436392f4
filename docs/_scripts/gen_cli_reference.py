"""Writes ``reference/cli.md`` from the live Typer app: every command's help, usage and options.

Run by the mkdocs-gen-files plugin at build time, so the page always matches the code. It walks
the command tree the way click dispatches it (``list_commands``/``get_command`` of each group,
which also loads the root's lazily imported subsystems) and never invokes a command.
"""

from __future__ import annotations

import inspect
from typing import Any

import mkdocs_gen_files
import typer

import hetsched.cli

HIDDEN_PARAMS = {"install_completion", "show_completion"}


def _context_class(command: Any) -> Any:
    """The Context class of the click implementation the command comes from (Typer vendors one)."""
    return command.context_class


def _walk(command: Any, path: list[str], parent_ctx: Any, out: list[tuple[list[str], Any, Any]]):
    ctx = _context_class(command)(command, info_name=path[-1], parent=parent_ctx)
    out.append((path, command, ctx))
    if not hasattr(command, "list_commands"):
        return
    for name in sorted(command.list_commands(ctx)):
        sub = command.get_command(ctx, name)
        if not getattr(sub, "hidden", False):
            _walk(sub, [*path, name], ctx, out)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _command_markdown(path: list[str], command: Any, ctx: Any) -> str:
    level = min(len(path) + 1, 4)
    lines = [f"{'#' * level} `{' '.join(path)}`", ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [help_text, ""]
    usage = command.get_usage(ctx).strip()
    lines += ["```text", usage, "```", ""]
    rows = []
    for param in command.params:
        if param.name in HIDDEN_PARAMS or getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            names, text = param.name.upper(), "(argument)"
        else:
            names, text = record
        kind = "argument" if param.param_type_name == "argument" else "option"
        rows.append(f"| `{_escape(names)}` | {kind} | {_escape(text)} |")
    if rows:
        lines += ["| name | kind | help |", "| --- | --- | --- |", *rows, ""]
    subcommands = sorted(command.list_commands(ctx)) if hasattr(command, "list_commands") else []
    if subcommands:
        lines += ["Sub-commands: " + ", ".join(f"`{name}`" for name in subcommands) + ".", ""]
    return "\n".join(lines)


def render() -> str:
    """The whole CLI reference page as Markdown."""
    root = typer.main.get_command(hetsched.cli.typer_app)
    entries: list[tuple[list[str], Any, Any]] = []
    _walk(root, ["hetsched"], None, entries)
    parts = [
        "# CLI reference",
        "",
        "Generated at build time from the Typer app (`hetsched.cli`); every command, its usage and",
        "its options. `hetsched COMMAND --help` prints the same in a terminal.",
        "",
    ]
    parts += [_command_markdown(path, command, ctx) for path, command, ctx in entries]
    return "\n".join(parts)


with mkdocs_gen_files.open("reference/cli.md", "w") as handle:
    handle.write(render())
