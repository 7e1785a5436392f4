"""The jobs package's import graph, read from the source with ``ast``: no import circles (counting
function-local imports too, so none can hide inside a function), no function-local import of a
hetsched module, no ``_private`` name imported from another module, no library module that
imports a CLI module, and rooms that import only rooms of lower layers."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import hetsched

SRC = Path(hetsched.__file__).resolve().parent
JOBS = "hetsched.jobs"
CLI = "hetsched.jobs.cli"
#: The rooms of hetsched.jobs and their layers (see hetsched/jobs/__init__.py): a room may import
#: its own modules and rooms of lower layers only, so rooms of one layer never import each other.
LAYERS = {
    "cluster": 1,
    "traces": 2,
    "policies": 3,
    "placement": 3,
    "sim": 4,
    "rl": 5,
    "slurm": 5,
    "cli": 6,
}


@dataclass(frozen=True)
class Import:
    """One imported hetsched module (or one name from it) in one module."""

    importer: str
    target: str
    name: str | None
    line: int
    local: bool


def module_name(path: Path) -> str:
    """``src/hetsched/jobs/traces/swf.py`` -> ``hetsched.jobs.traces.swf``."""
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of the source tree."""
    base = SRC.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(source: str, importer: str, is_package: bool = False) -> list[Import]:
    """The hetsched imports in the ``source`` of module ``importer``; ``from m import x`` targets
    ``m.x`` when that is a module, else ``m``. ``local`` marks imports inside a function or class
    body (a top-level ``if TYPE_CHECKING:`` block does not count: it never runs)."""
    tree = ast.parse(source)
    package = importer if is_package else importer.rsplit(".", 1)[0]
    top_level = {id(node) for node in tree.body}
    found: list[Import] = []
    for node in ast.walk(tree):
        local = id(node) not in top_level and not _under_type_checking(tree, node)
        if isinstance(node, ast.Import):
            found += [
                Import(importer, alias.name, None, node.lineno, local)
                for alias in node.names
                if alias.name.startswith("hetsched")
            ]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith("hetsched"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if is_module(sub) else base
                found.append(Import(importer, target, alias.name, node.lineno, local))
    return found


def _under_type_checking(tree: ast.Module, node: ast.AST) -> bool:
    """Whether ``node`` sits in a top-level ``if TYPE_CHECKING:`` block (not run at import)."""
    return any(
        isinstance(statement, ast.If)
        and "TYPE_CHECKING" in ast.unparse(statement.test)
        and any(child is node for child in ast.walk(statement))
        for statement in tree.body
    )


def jobs_imports() -> list[Import]:
    """Every hetsched import made by a module of ``hetsched.jobs``."""
    return [
        record
        for path in sorted((SRC / "jobs").rglob("*.py"))
        for record in imports_of(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
        )
    ]


def is_cli_module(name: str) -> bool:
    """Typer command modules: they parse options, call library code and print."""
    return name == CLI or name.startswith(CLI + ".")


def room_of(name: str) -> str | None:
    """``hetsched.jobs.sim.windows`` -> ``sim``; None for the package itself."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 else None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph.get(root, ())))]
        state[root] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(sorted(graph.get(child, ()))))
    return None


def jobs_graph() -> dict[str, set[str]]:
    """Module -> the hetsched.jobs modules it imports (module-level and function-local)."""
    graph: dict[str, set[str]] = {}
    for record in jobs_imports():
        if record.target.startswith(JOBS) and record.target != record.importer:
            graph.setdefault(record.importer, set()).add(record.target)
    return graph


def test_the_cycle_finder_finds_circles_and_only_circles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"x": {"y"}, "y": {"z"}, "z": {"y"}}) == ["y", "z", "y"]


def test_the_import_reader_sees_local_relative_and_private_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "from hetsched.jobs import traces\n"
        "from . import _helper\n"
        "if TYPE_CHECKING:\n"
        "    from hetsched.jobs.traces.common import Trace\n"
        "def f():\n"
        "    import hetsched.core.errors\n"
    )
    found = {(r.target, r.name, r.local) for r in imports_of(source, "hetsched.jobs.traces.swf")}
    assert found == {
        ("hetsched.jobs.traces", "traces", False),
        ("hetsched.jobs.traces", "_helper", False),
        ("hetsched.jobs.traces.common", "Trace", False),
        ("hetsched.core.errors", None, True),
    }
    assert is_module("hetsched.jobs.traces") and not is_module("hetsched.jobs.no_such_module")


def test_no_import_circles_among_jobs_modules() -> None:
    cycle = find_cycle(jobs_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_function_local_imports_of_hetsched_modules() -> None:
    local = [f"{r.importer}:{r.line} imports {r.target}" for r in jobs_imports() if r.local]
    assert not local, "import these at the top of the module:\n" + "\n".join(local)


def test_no_private_name_is_imported_from_another_module() -> None:
    private = [
        f"{r.importer}:{r.line} imports {r.name} from {r.target}"
        for r in jobs_imports()
        if r.name is not None and r.name.startswith("_") and r.target != r.importer
    ]
    assert not private, "\n".join(private)


def test_library_modules_never_import_a_cli_module() -> None:
    wrong = [
        f"{r.importer}:{r.line} imports {r.target}"
        for r in jobs_imports()
        if is_cli_module(r.target) and not is_cli_module(r.importer)
    ]
    assert not wrong, "\n".join(wrong)


def test_every_module_sits_in_a_room() -> None:
    homeless = [
        module_name(path)
        for path in sorted((SRC / "jobs").rglob("*.py"))
        if module_name(path) != JOBS and room_of(module_name(path)) not in LAYERS
    ]
    assert not homeless, f"modules outside the rooms {sorted(LAYERS)}: {homeless}"


def test_rooms_import_only_lower_layers() -> None:
    upward = []
    for record in jobs_imports():
        source, target = room_of(record.importer), room_of(record.target)
        if not record.target.startswith(JOBS) or target is None or source in (None, target):
            continue
        if LAYERS[target] >= LAYERS[str(source)]:
            upward.append(f"{record.importer}:{record.line} imports {record.target}")
    assert not upward, "a room imports its own or a higher layer:\n" + "\n".join(upward)
