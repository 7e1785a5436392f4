"""`hetsched slim run-server --sim` end to end on a tiny budget."""

import json

from typer.testing import CliRunner

from hetsched.cli import typer_app

runner = CliRunner()


def test_run_server_sim_prints_and_saves_metrics(tmp_path):
    args = ["slim", "run-server", "--sim", "--device", "t4", "--rate", "2000", "--pattern",
            "bursty", "--duration-s", "0.2", "--seed", "1", "--max-batch", "8",
            "--out", str(tmp_path)]  # fmt: skip
    result = runner.invoke(typer_app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for row in ("throughput", "p50 / p90 / p99", "VRAM peak", "source: model", "loads / unloads"):
        assert row in result.output
    saved = json.loads((tmp_path / "run-server.json").read_text())
    report = saved["report"]
    assert report["requests_completed"] == report["requests_submitted"] > 100
    assert report["energy_source"] == "model" and report["energy_j"] > 0
    assert saved["config"]["max_batch"] == 8 and saved["series"]["time_s"]
    assert "hetsched_slim_queue_duration_seconds_bucket" in (tmp_path / "metrics.prom").read_text()


def test_run_server_errors_name_the_problem(tmp_path):
    from hetsched.core.errors import ConfigError, HetschedError, UnknownNameError

    base = ["slim", "run-server", "--duration-s", "0.1", "--out", str(tmp_path)]
    result = runner.invoke(typer_app, base)
    assert isinstance(result.exception, HetschedError) and "--sim" in str(result.exception)
    result = runner.invoke(typer_app, [*base, "--sim", "--device", "tpu-v9"])
    assert isinstance(result.exception, UnknownNameError)
    result = runner.invoke(typer_app, [*base, "--sim", "--max-batch", "0"])
    assert isinstance(result.exception, ConfigError) and "max_batch" in str(result.exception)
    result = runner.invoke(typer_app, [*base, "--sim", "--pattern", "steady"])
    assert isinstance(result.exception, ConfigError) and "--pattern" in str(result.exception)
