"""The Slim package's import graph: no circles, no private names across modules, CLIs on top.

Read from the source with ``ast`` (nothing is imported), so a circle hidden behind a
function-local or ``TYPE_CHECKING`` import counts as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hetsched

SOURCE_ROOT = Path(hetsched.__file__).resolve().parent.parent
SLIM = SOURCE_ROOT / "hetsched" / "slim"


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def slim_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SLIM.rglob("*.py"))}


def imports_of(path: Path) -> list[tuple[str, str | None]]:
    """(module, imported name or None) for every import in the file, at any depth."""
    found: list[tuple[str, str | None]] = []
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(base, alias.name) for alias in node.names]
    return found


def package_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports (``from pkg import mod`` counts as
    ``pkg.mod``); the tail test reuses it for its own package."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for module, imported in imports_of(path):
            if imported is not None and f"{module}.{imported}" in modules:
                targets.add(f"{module}.{imported}")
            elif module in modules:
                targets.add(module)
        targets.discard(name)
        edges[name] = targets
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path of module names, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_search_finds_a_circle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_slim_has_no_import_circles() -> None:
    cycle = find_cycle(package_edges(slim_modules()))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_rooms_form_layers() -> None:
    """Sub-packages ("rooms") import each other in one direction only (docs/architecture.md)."""
    rooms: dict[str, set[str]] = {}
    for source, targets in package_edges(slim_modules()).items():
        room = source.split(".")[2] if source.count(".") >= 2 else "slim"
        rooms.setdefault(room, set())
        for target in targets:
            other = target.split(".")[2] if target.count(".") >= 2 else "slim"
            if other != room:
                rooms[room].add(other)
    cycle = find_cycle(rooms)
    assert cycle is None, "rooms import each other: " + " -> ".join(cycle or [])


def test_no_private_name_is_imported_from_another_module() -> None:
    offenders = [
        f"{name} imports {imported} from {module}"
        for name, path in slim_modules().items()
        for module, imported in imports_of(path)
        if module.startswith("hetsched")
        and imported
        and imported.startswith("_")
        and not imported.startswith("__")
    ]
    assert offenders == []


@pytest.mark.parametrize("name", [n for n in slim_modules() if not n.endswith("cli")])
def test_library_modules_import_no_cli_module(name: str) -> None:
    cli_imports = [
        module
        for module, imported in imports_of(slim_modules()[name])
        if module.endswith(".cli") or (imported == "cli" and module.startswith("hetsched"))
    ]
    assert cli_imports == [], f"{name} imports a CLI module"


def imports_hetsched(node: ast.AST) -> bool:
    """Whether ``node`` is an import statement naming a hetsched module."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").startswith("hetsched")
    return isinstance(node, ast.Import) and any(a.name.startswith("hetsched") for a in node.names)


def test_no_function_local_import_of_a_hetsched_module() -> None:
    """Only heavy optional dependencies may be imported inside functions: ``slim.serving`` wraps
    the optional ``serve`` extra (Ray, FastAPI), so its modules are imported where they are used."""
    offenders = []
    for name, path in slim_modules().items():
        if name.startswith("hetsched.slim.serving"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            offenders += [
                f"{name}:{node.lineno}" for node in ast.walk(function) if imports_hetsched(node)
            ]
    assert offenders == []
