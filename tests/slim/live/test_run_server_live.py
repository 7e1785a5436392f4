"""`hetsched slim run-server` without --sim: the live backend on the CPU, end to end."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import ConfigError


def test_run_server_live_on_the_cpu_completes_every_request(tmp_path) -> None:
    args = ["slim", "run-server", "--device", "cpu", "--rate", "40", "--duration-s", "0.5"]
    result = CliRunner().invoke(typer_app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "run-server live cpu" in result.output
    report = json.loads((tmp_path / "run-server.json").read_text())["report"]
    assert report["backend"] == "live"
    assert report["requests_completed"] == report["requests_submitted"] > 0
    assert report["energy_source"] in {"power-model", "rapl"} and report["energy_j"] > 0
    assert report["loads"] >= 1 and report["vram_peak_bytes"] > 0


def test_run_server_live_names_a_bad_device(tmp_path) -> None:
    args = ["slim", "run-server", "--device", "cuda:x", "--out", str(tmp_path)]
    result = CliRunner().invoke(typer_app, args)
    assert isinstance(result.exception, ConfigError)
    assert "without --sim runs live: device 'cuda:x'" in str(result.exception)
