"""`hetsched demo` end to end on a tiny budget: every step runs and leaves its artefacts."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hetsched.cli import typer_app


def test_demo_runs_every_step_on_a_tiny_budget(tmp_path) -> None:
    out = tmp_path / "demo"
    args = ["demo", "--out", str(out), "--data", "digits:8", "--epochs", "1", "--limit", "32"]
    result = CliRunner().invoke(
        typer_app, [*args, "--router-decisions", "64", "--router-images", "40"]
    )
    assert result.exit_code == 0, result.output
    for step in (
        "1. Slim Scheduler model",
        "2. Accuracy table",
        "3. Tables I and II",
        "4. Routing",
    ):
        assert step in result.output
    assert "Table III" in result.output and "Table V" in result.output
    assert (out / "model" / "accuracy_table.json").is_file()
    results = json.loads((out / "router" / "results.json").read_text())
    assert results["scenario"]["accuracy_table"].endswith("accuracy_table.json")
    for policy in ("random", "constant-best", "ppo-efficiency", "ppo-balanced"):
        run = results["runs"][policy][0]
        assert run["images_completed"] == 40, run
