"""The tail package's import graph: no circles, no function-local imports of our modules, and no
library module importing a CLI module (the CLI modules only parse, call library code and print).

Read from the source with ``ast`` (nothing is imported); the graph helpers are the Slim test's.
"""

from __future__ import annotations

import ast

import pytest

from tests.slim.test_import_graph import (
    SOURCE_ROOT,
    find_cycle,
    imports_hetsched,
    module_name,
    package_edges,
)

TAIL = SOURCE_ROOT / "hetsched" / "tail"
CLI_MODULES = {"hetsched.tail.cli", "hetsched.tail.cli_serve", "hetsched.tail.cli_benchmark"}


def tail_modules() -> dict:
    return {module_name(path): path for path in sorted(TAIL.rglob("*.py"))}


def tail_edges() -> dict[str, set[str]]:
    """Module -> the tail modules it imports."""
    return package_edges(tail_modules())


def test_the_cli_modules_exist() -> None:
    assert set(tail_modules()) >= CLI_MODULES


def test_tail_has_no_import_circles() -> None:
    cycle = find_cycle(tail_edges())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_function_local_import_of_a_hetsched_module() -> None:
    """Heavy third-party packages (torch, xgboost, matplotlib) may be imported where used; our
    own modules are imported at the top, so the graph above is the whole graph."""
    offenders = []
    for name, path in tail_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                offenders += [
                    f"{name}:{n.lineno}" for n in ast.walk(function) if imports_hetsched(n)
                ]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(set(tail_modules()) - CLI_MODULES))
def test_library_modules_import_no_cli_module(name: str) -> None:
    assert tail_edges()[name].isdisjoint(CLI_MODULES), f"{name} imports a CLI module"


def test_only_the_tail_app_imports_the_other_cli_modules_and_nothing_imports_it() -> None:
    edges = tail_edges()
    assert not any("hetsched.tail.cli" in targets for targets in edges.values())
    for name in CLI_MODULES - {"hetsched.tail.cli"}:
        assert [m for m, targets in edges.items() if name in targets] == ["hetsched.tail.cli"]
