"""Tiny-budget run of `hetsched slim experiment --scenarios`: tables, JSON, CSV, Pareto plots."""

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import ConfigError
from hetsched.slim.experiments.scenario_experiment import experiment_routers, needs_checkpoint
from hetsched.slim.experiments.scenario_report import ci95_half_width, pareto_front

runner = CliRunner()


def test_experiment_over_scenarios_writes_tables_json_csv_and_pareto_plots(tmp_path):
    result = runner.invoke(
        typer_app,
        [
            "slim",
            "experiment",
            "--scenarios",
            "lan-3x,failure",
            "--seeds",
            "2",
            "--images",
            "300",
            "--routers",
            "static-slimmest,least-loaded,ppo",
            "--slo-ms",
            "50",
            "--out",
            str(tmp_path),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "failure (HELD OUT)" in result.output and "lan-3x:" in result.output
    assert "skipped ppo" in result.output
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["seeds"] == [0, 1]
    by_name = {entry["scenario"]: entry for entry in document["results"]}
    assert by_name["failure"]["held_out"] and not by_name["lan-3x"]["held_out"]
    slimmest = by_name["lan-3x"]["routers"]["static-slimmest"]
    assert slimmest["seeds"] == 2 and len(slimmest["runs"]) == 2
    assert 0.0 <= slimmest["slo_attainment"]["mean"] <= 1.0
    assert slimmest["executed_widths"]["0.25"] == 1.0
    assert "ppo" in by_name["lan-3x"]["skipped"]
    assert document["scenarios"]["lan-3x"]["slo_ms"] == 50
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert {(r["scenario"], r["router"]) for r in rows} == {
        (s, r) for s in ("lan-3x", "failure") for r in ("static-slimmest", "least-loaded")
    }
    for scenario in ("lan-3x", "failure"):
        assert (tmp_path / f"pareto-{scenario}.png").stat().st_size > 1000


def test_learned_routers_need_a_checkpoint_and_unknown_names_fail():
    assert needs_checkpoint("ppo") and not needs_checkpoint("random")
    assert not needs_checkpoint("learned")  # the package ships one
    factories, skipped = experiment_routers(None, {})
    assert "ppo" in skipped and "random" in factories and "learned" in factories
    with pytest.raises(ConfigError, match=r"no such file: learned=/nope\.pt"):
        experiment_routers(["learned"], {"learned": Path("/nope.pt")})
    result = runner.invoke(typer_app, ["slim", "experiment", "--scenarios", "nope"])
    assert "unknown scenario 'nope'" in str(result.exception)
    result = runner.invoke(
        typer_app, ["slim", "experiment", "--scenarios", "paper", "--routers", "nope"]
    )
    assert "unknown router 'nope'" in str(result.exception)
    result = runner.invoke(
        typer_app, ["slim", "experiment", "--scenarios", "paper", "--routers", ",,"]
    )
    assert "--routers: no router named" in str(result.exception)


def test_confidence_interval_and_pareto_front():
    assert ci95_half_width([1.0]) != ci95_half_width([1.0])  # NaN below two seeds
    # five values with sample std 1: t(4) = 2.776
    values = [-1.2649110640673518, -0.6324555320336759, 0.0, 0.6324555320336759, 1.2649110640673518]
    assert abs(ci95_half_width(values) - 2.776 / 5**0.5) < 1e-9
    front = pareto_front({"a": (1.0, 70.0), "b": (0.9, 76.0), "c": (0.8, 75.0), "d": (1.0, 69.0)})
    assert front == {"a", "b"}


def test_shipped_scenarios_run_exact_widths_unless_free_best_fit_is_asked_for(tmp_path):
    """Every shipped scenario but paper runs each request at its routed width; ``--free-best-fit``
    restores the paper's FINDFREEBESTFIT, under which a request may run wider."""
    widths = {}
    for flag in ("", "--free-best-fit"):  # the scenario's own setting, then the paper's
        out = tmp_path / (flag.strip("-") or "default")
        args = ["slim", "experiment", "--scenarios", "lan-3x", "--seeds", "1", "--images", "600"]
        args += ["--routers", "random", "--out", str(out)]
        result = runner.invoke(typer_app, args + ([flag] if flag else []))
        assert result.exit_code == 0, result.output
        document = json.loads((out / "results.json").read_text())
        assert document["scenarios"]["lan-3x"]["executor"]["exact_width"] is (not flag)
        run = document["results"][0]["routers"]["random"]
        widths[flag] = (run["requested_widths"], run["executed_widths"])
    requested, executed = widths[""]
    assert executed == pytest.approx(requested)
    requested, executed = widths["--free-best-fit"]
    assert executed["1"] > requested["1"]  # run on free wider instances
