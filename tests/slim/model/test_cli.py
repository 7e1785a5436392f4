"""`hetsched slim train` and `hetsched slim accuracy` end to end on a tiny budget."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import DataError
from hetsched.slim.model.accuracy import load_accuracy_table
from hetsched.slim.model.costs import SegmentCostTable


def test_train_then_accuracy(tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "run"
    args = ["slim", "train", "--data", "digits:8", "--epochs", "1", "--limit", "32"]
    result = runner.invoke(typer_app, [*args, "--batch-size", "16", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "epoch 1/1" in result.output
    assert {"checkpoint.pt", "cost_table.json", "training_history.json"} <= {
        p.name for p in out.iterdir()
    }
    assert SegmentCostTable.from_json(out / "cost_table.json").image_size == 8
    assert len(json.loads((out / "training_history.json").read_text())) == 1

    result = runner.invoke(
        typer_app,
        [
            "slim",
            "accuracy",
            "--checkpoint",
            str(out / "checkpoint.pt"),
            "--out",
            str(out),
            "--limit",
            "8",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Table I" in result.output and "Table II" in result.output and "76.43" in result.output
    table = load_accuracy_table(out / "accuracy_table.json")
    assert table.num_images == 8 and len(table.tuples()) == 256


def test_bad_data_path_is_a_data_error(tmp_path) -> None:
    result = CliRunner().invoke(
        typer_app, ["slim", "train", "--data", f"cifar100:{tmp_path / 'nope'}", "--out", "x"]
    )
    assert isinstance(result.exception, DataError)
    assert "nope: CIFAR-100 folder not found" in str(result.exception)
