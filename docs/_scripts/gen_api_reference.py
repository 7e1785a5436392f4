"""Writes one API page per module of ``src/hetsched`` plus a literate-nav ``SUMMARY.md``.

Run by the mkdocs-gen-files plugin at build time. It walks the source tree (not an import), so
modules that move between sub-packages show up at their new path on the next build.
"""

from __future__ import annotations

from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = SRC / "hetsched"

nav = mkdocs_gen_files.Nav()

for source in sorted(PACKAGE.rglob("*.py")):
    if "__pycache__" in source.parts:
        continue
    module_parts = list(source.relative_to(SRC).with_suffix("").parts)
    if any(part.startswith("_") and part != "__init__" for part in module_parts):
        continue
    doc_parts = list(source.relative_to(SRC).with_suffix(".md").parts)
    if module_parts[-1] == "__init__":
        module_parts = module_parts[:-1]
        doc_parts = [*doc_parts[:-1], "index.md"]
    nav[tuple(module_parts)] = Path(*doc_parts).as_posix()
    module = ".".join(module_parts)
    with mkdocs_gen_files.open(Path("reference/api", *doc_parts), "w") as handle:
        handle.write(f"# `{module}`\n\n::: {module}\n")
    mkdocs_gen_files.set_edit_path(Path("reference/api", *doc_parts), source.relative_to(ROOT))

with mkdocs_gen_files.open("reference/api/SUMMARY.md", "w") as handle:
    handle.writelines(nav.build_literate_nav())
