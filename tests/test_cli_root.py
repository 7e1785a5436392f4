"""The root command: lists every subsystem without importing it, and dispatches to each."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from hetsched import __version__
from hetsched.cli import SUBSYSTEMS, typer_app

HELP_WITHOUT_HEAVY_IMPORTS = """
import sys
sys.argv = ["hetsched", "--help"]
from hetsched.cli import app
try:
    app()
except SystemExit:
    pass
heavy = sorted(m for m in ("torch", "scipy", "ray", "hetsched.slim.cli") if m in sys.modules)
print("HEAVY:", ",".join(heavy))
"""


def test_root_help_lists_subsystems_without_importing_them():
    result = subprocess.run(
        [sys.executable, "-c", HELP_WITHOUT_HEAVY_IMPORTS], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    for name in SUBSYSTEMS:
        assert name in result.stdout
    assert result.stdout.strip().endswith("HEAVY:"), result.stdout[-200:]


def test_every_subsystem_resolves_to_its_commands():
    runner = CliRunner()
    for name in SUBSYSTEMS:
        result = runner.invoke(typer_app, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "install-completion" not in result.output


def test_version():
    result = CliRunner().invoke(typer_app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"hetsched {__version__}"


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(typer_app, ["nope"])
    assert result.exit_code == 2
