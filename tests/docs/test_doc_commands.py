"""Every shell example in README.md and docs/ must parse against the real CLI, and a few must run.

Shell examples are the ``hetsched ...`` and ``make ...`` lines of ```bash / ```console / ```sh
blocks (``$ `` prompts stripped, ``\\`` continuations joined). For each ``hetsched`` line the test
resolves the command path in the Typer app and builds the leaf command's context with click's
``make_context`` (parsing every option, invoking nothing). Every input path the line names must
exist in the clone or be written by an earlier example on the same page (an ``--out`` folder or
file, or another output option's value or default). ``make`` lines must name a Makefile target.
Python blocks' ``from hetsched... import`` lines must import. A short checked list of cheap
examples is also run, in a temporary folder.
"""

from __future__ import annotations

import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import hetsched.cli
from hetsched.core.errors import HetschedError
from hetsched.jobs.traces.samples import is_sample, resolve_trace

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_LANGS = {"bash", "console", "sh", "shell"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
PATH_SUFFIXES = (".csv", ".swf", ".pt", ".json", ".yaml", ".yml", ".onnx", ".png", ".prom")
# Options whose value a command writes rather than reads, per command path ("*" = every command).
OUTPUT_OPTIONS = {"*": {"out"}, "tail train": {"repo"}, "tail retrain": {"repo"}}
# Cheap examples that are also run (each must appear verbatim on some page). Seconds each.
RUN = [
    "hetsched slim run-server --sim --device rtx-2080-ti --rate 2000 --duration-s 1",
    "hetsched jobs trace-info sample:alibaba2023",
    "hetsched jobs simulate --trace sample:alibaba2023"
    " --policy fcfs,sjf,wfp3,f1,slurm,qssf --backfill --out runs/jobs/alibaba-sample",
    "hetsched tail flops resnet50 retinanet cnn-s",
]


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.text}"


def _blocks(page: Path) -> list[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of every fenced block of a Markdown page."""
    blocks: list[tuple[str, int, list[str]]] = []
    lines = page.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match and match.group(2):
            indent, lang, start = match.group(1), match.group(2).lower(), i + 1
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            blocks.append((lang, start + 1, body))
        elif match:  # a fence without a language: skip to its end
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
        i += 1
    return blocks


def _shell_lines(start: int, body: list[str]) -> list[tuple[int, str]]:
    """(line number, command) of a shell block, ``$ `` prompts stripped, continuations joined."""
    joined: list[tuple[int, str]] = []
    pending, pending_line = "", 0
    for offset, raw in enumerate(body):
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not pending:
            pending_line = start + offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append((pending_line, (pending + line).strip()))
        pending = ""
    return joined


def _written_by_block(lang: str, body: list[str]) -> set[str]:
    """Files a non-shell block shows being written: a block headed ``# FILE ...`` (a config file's
    content) or a path literal passed to a ``save``/``open`` call in a Python block."""
    written: set[str] = set()
    if body and body[0].startswith("# "):
        first = body[0][2:].split()[0] if body[0][2:].split() else ""
        if _looks_like_path(first):
            written.add(first)
    if lang == "python":
        for line in body:
            if re.search(r"\b(save\w*|open)\(", line):
                written.update(v for v in re.findall(r'"([^"]+)"', line) if _looks_like_path(v))
    return written


def page_items(page: Path) -> list[Example | str]:
    """A page's shell examples (``hetsched``/``make`` lines) and, in page order, the paths its
    other blocks write (as plain strings)."""
    items: list[Example | str] = []
    for lang, start, body in _blocks(page):
        if lang in SHELL_LANGS:
            for number, text in _shell_lines(start, body):
                if text.startswith(("hetsched ", "make ")) or text in {"hetsched", "make"}:
                    items.append(Example(page, number, text))
        else:
            items.extend(sorted(_written_by_block(lang, body)))
    return items


def shell_examples(page: Path) -> list[Example]:
    """The ``hetsched``/``make`` commands of a page's shell blocks."""
    return [item for item in page_items(page) if isinstance(item, Example)]


def python_imports(page: Path) -> list[Example]:
    """``from hetsched... import ...`` lines of a page's Python blocks."""
    found: list[Example] = []
    for lang, start, body in _blocks(page):
        if lang != "python":
            continue
        for offset, line in enumerate(body):
            if re.match(r"\s*from hetsched[\w.]* import ", line):
                found.append(Example(page, start + offset, line.strip()))
    return found


def _root_command() -> Any:
    return typer.main.get_command(hetsched.cli.typer_app)


def _tokens(text: str) -> list[str]:
    """Shell words of a command, without a trailing comment, redirection or pipeline."""
    words = shlex.split(text, comments=True)
    for i, word in enumerate(words):
        if word in {"|", "&&", ";", ">", ">>", "2>&1", "&"}:
            return words[:i]
    return words


def _resolve(args: list[str]) -> tuple[Any, list[str], list[str]]:
    """(leaf command, command path, remaining args) of ``hetsched ARGS``."""
    command, path = _root_command(), []
    rest = list(args)
    while rest and hasattr(command, "list_commands") and not rest[0].startswith("-"):
        name = rest[0]
        # Groups here ignore the context (the root loads its subsystems by name).
        assert name in command.list_commands(None), f"no command {' '.join([*path, name])!r}"
        command, path, rest = command.get_command(None, name), [*path, name], rest[1:]
    return command, path, rest


def _looks_like_path(value: str) -> bool:
    if "://" in value or value.startswith(("http:", "https:")) or ":" in value.split("/")[0]:
        return False
    if value in {"-", "paper"} or "," in value:
        return False
    return "/" in value or value.endswith(PATH_SUFFIXES)


def _is_under(path: str, outputs: set[str]) -> bool:
    norm = Path(path)
    return any(norm == Path(out) or Path(out) in norm.parents for out in outputs)


def _output_names(path: list[str]) -> set[str]:
    return OUTPUT_OPTIONS["*"] | OUTPUT_OPTIONS.get(" ".join(path), set())


ALL_SHELL = [example for page in PAGES for example in shell_examples(page)]
ALL_IMPORTS = [example for page in PAGES for example in python_imports(page)]


def check_example(example: Example, outputs: set[str]) -> None:
    """Parses one example with the real CLI and checks its input paths; records its outputs."""
    words = _tokens(example.text)
    if words[0] == "make":
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        for target in words[1:]:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no make target {target}"
        return
    command, path, rest = _resolve(words[1:])
    if "--help" in rest:  # the command path exists; --help would print and exit
        return
    assert path, "a bare `hetsched` needs a sub-command in an example"
    try:
        ctx = command.make_context(path[-1], list(rest))
    except Exception as error:  # click's UsageError/BadParameter, from Typer's vendored click
        raise AssertionError(f"does not parse: {error}") from error
    output_names = _output_names(path)
    for name, value in ctx.params.items():
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is None or isinstance(item, bool | int | float):
                continue
            text = str(item)
            if name in output_names:
                outputs.add(text)
                continue
            given = text in rest or any(w.endswith("=" + text) for w in rest)
            if given and is_sample(text):  # a trace shipped in the package, by name
                try:
                    resolve_trace(text)
                except HetschedError as error:
                    raise AssertionError(f"{name}={text!r}: {error}") from error
                continue
            name_part, equals, value_part = text.partition("=")
            if given and equals and "/" not in name_part:
                text = value_part  # NAME=PATH (e.g. --router-checkpoint learned=runs/x.pt)
            if not given or not _looks_like_path(text):
                continue
            assert (ROOT / text).exists() or _is_under(text, outputs), (
                f"{name}={text!r} is neither in the clone nor written by an earlier example"
            )


def test_pages_have_examples() -> None:
    assert (ROOT / "README.md").is_file()
    assert len(ALL_SHELL) >= 10, "the README and docs should show their commands"
    pages_with_examples = {example.page.name for example in ALL_SHELL}
    assert "README.md" in pages_with_examples


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_example_parses(page: Path) -> None:
    outputs: set[str] = set()
    failures = []
    for example in page_items(page):
        if isinstance(example, str):
            outputs.add(example)
            continue
        try:
            check_example(example, outputs)
        except AssertionError as error:
            failures.append(f"{example}\n    {error}")
    assert not failures, "broken documented commands:\n" + "\n".join(failures)


@pytest.mark.parametrize("example", ALL_IMPORTS, ids=str)
def test_python_example_imports(example: Example) -> None:
    match = re.match(r"from ([\w.]+) import (.+)", example.text)
    assert match, example
    module = importlib.import_module(match.group(1))
    names = [n.strip().split(" as ")[0] for n in match.group(2).split("#")[0].split(",")]
    missing = [n for n in names if n and not hasattr(module, n)]
    assert not missing, f"{example}: {match.group(1)} has no {missing}"


def test_the_checker_rejects_broken_commands() -> None:
    page = ROOT / "README.md"
    for text in [
        "hetsched slim no-such-command",
        "hetsched jobs simulate --no-such-option 1",
        "hetsched jobs simulate --trace does/not/exist.csv --policy fcfs",
        "hetsched jobs simulate --trace sample:no-such-sample --policy fcfs",
        "hetsched slim run-server --rate not-a-number",
        "make no-such-target",
    ]:
        with pytest.raises(AssertionError):
            check_example(Example(page, 0, text), set())
    check_example(
        Example(page, 0, "hetsched jobs synth --profile helios --out x/t.csv"), out := set()
    )
    check_example(Example(page, 0, "hetsched jobs simulate --trace x/t.csv --policy fcfs"), out)


def test_run_list_is_documented() -> None:
    documented = {example.text for example in ALL_SHELL}
    missing = [command for command in RUN if command not in documented]
    assert not missing, f"checked commands no page shows any more: {missing}"


def test_cheap_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    app = hetsched.cli.typer_app
    for command in RUN:
        result = runner.invoke(app, _tokens(command)[1:])
        assert result.exit_code == 0, f"{command}\n{result.output}\n{result.exception!r}"


def _dotted_references() -> list[Example]:
    """Backticked ``hetsched.x.y`` names in the prose (not ``hetsched.io/...`` annotations)."""
    found: list[Example] = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), start=1):
            for match in re.finditer(r"`(hetsched(?:\.\w+)+)(?![\w/-])", line):
                found.append(Example(page, number, match.group(1)))
    return found


@pytest.mark.parametrize("reference", _dotted_references(), ids=str)
def test_dotted_references_resolve(reference: Example) -> None:
    parts = reference.text.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(target, attribute), f"{reference}: no {attribute!r} (moved?)"
            target = getattr(target, attribute)
        return
    raise AssertionError(f"{reference}: no such module")
