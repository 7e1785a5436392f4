"""Appends the room list (sub-packages and their modules) to ``architecture.md`` at build time.

The list is read from the source tree, so it follows the code when modules move between rooms.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "hetsched"


def _summary(path: Path) -> str:
    """The first line of a module's docstring, or an empty string."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().split("\n")[0]


def _rooms() -> list[str]:
    lines: list[str] = []
    for package in sorted(p for p in PACKAGE.rglob("*") if (p / "__init__.py").is_file()):
        if "__pycache__" in package.parts:
            continue
        relative = package.relative_to(PACKAGE.parent)
        depth = len(relative.parts) - 1
        if depth == 0:
            continue
        modules = sorted(m.stem for m in package.glob("*.py") if not m.stem.startswith("_"))
        heading = "###" if depth == 1 else "####"
        dotted = ".".join(relative.parts)
        lines += [f"{heading} `{dotted}`", "", _summary(package / "__init__.py"), ""]
        if modules:
            lines += ["Modules: " + ", ".join(f"`{m}`" for m in modules) + ".", ""]
    return lines


with mkdocs_gen_files.open("architecture.md", "a") as handle:
    handle.write("\n" + "\n".join(_rooms()) + "\n")
