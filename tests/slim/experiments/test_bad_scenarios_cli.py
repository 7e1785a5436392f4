"""Bad scenarios through the console-script entry point: exit 2, one line naming the field.

The entry point (:func:`hetsched.cli.app`) is what a user runs; it turns a
:class:`~hetsched.core.errors.HetschedError` into one ``error:`` line on stderr and exit code 2.
Each case runs inside a :class:`~typer.testing.CliRunner` isolation (captured streams) with
``sys.argv`` set, so the whole path a user takes is tested, printing included.
"""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from hetsched import cli


def run_entry_point(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Exit code and stderr of ``hetsched ARGS`` run in this process."""
    monkeypatch.setattr(sys, "argv", ["hetsched", *args])
    monkeypatch.setenv(
        "COLUMNS", "1000"
    )  # rich wraps at the terminal's width; the message is one line
    runner = CliRunner()
    with runner.isolation() as streams:  # (stdout, stderr, ...) bytes buffers
        with pytest.raises(SystemExit) as exited:
            cli.app()
        return int(exited.value.code or 0), streams[1].getvalue().decode()


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("servers: []\n", "servers"),
        ("group_sizes: [4, 0]\n", "group_sizes"),
        ("group_sizes: []\n", "group_sizes"),
        ("servers: [cpu]\nnum_images: 0\n", "num_images"),
    ],
)
@pytest.mark.parametrize("command", ["experiment", "evaluate-router"])
def test_a_bad_scenario_file_is_one_line_naming_the_field(
    tmp_path, monkeypatch, yaml_text, field, command
):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    if command == "experiment":
        args = ["slim", "experiment", "--scenarios", str(path), "--routers", "random"]
    else:
        args = ["slim", "evaluate-router", "random", "--scenario", str(path)]
    code, stderr = run_entry_point([*args, "--out", str(tmp_path / "out")], monkeypatch)
    assert code == 2, stderr
    assert stderr.startswith("error:") and field in stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize(
    "args",
    [
        ["experiment", "--scenarios", "lan-3x", "--routers", "random", "--images", "0"],
        ["experiment", "--images", "0"],
        ["evaluate-router", "random", "--images", "0"],
    ],
)
def test_zero_images_is_one_line_naming_the_option(tmp_path, monkeypatch, args):
    code, stderr = run_entry_point(["slim", *args, "--out", str(tmp_path / "out")], monkeypatch)
    assert code == 2, stderr
    assert stderr.startswith("error:") and "--images" in stderr
    assert stderr.count("\n") == 1 and "nan" not in stderr
