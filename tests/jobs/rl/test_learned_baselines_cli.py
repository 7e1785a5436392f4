"""`hetsched jobs train --agent ...` then `hetsched jobs evaluate` for the learned baselines, with
tiny budgets: the run works end to end, writes a loadable checkpoint of the right kind, and
reproduces per seed."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import UnknownNameError
from hetsched.jobs.rl.agent import load_checkpoint

runner = CliRunner()
DATA = ["--synthetic", "philly", "--jobs", "1500", "--cluster-fraction", "0.02"]
TINY = [
    "--epochs", "1", "--trajectories-per-epoch", "3", "--trajectories-per-update", "3",
    "--episode-jobs", "64", "--max-queue", "32", "--metric", "bsld",
]  # fmt: skip
AGENTS = {"rlscheduler": "RLScheduler", "schedinspector": "SchedInspector-fcfs"}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the commands pin torch to one thread


def _invoke(*args: str):
    result = runner.invoke(typer_app, ["jobs", *args])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_train_then_evaluate_each_agent(agent, tmp_path):
    first, again, other = (tmp_path / name for name in ("first", "again", "other"))
    for out, seed in ((first, "0"), (again, "0"), (other, "1")):
        _invoke("train", *DATA, *TINY, "--agent", agent, "--seed", seed, "--out", str(out))
    loaded, meta = load_checkpoint(first / "agent.pt")
    assert loaded.kind == agent and meta["agent"] == agent and meta["metric"] == "bsld"
    weights = [
        torch.load(out / "agent.pt", weights_only=True)["state_dict"]
        for out in (first, again, other)
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # same seed
    assert not all(torch.equal(weights[0][k], weights[2][k]) for k in weights[0])  # other seed
    assert (first / "training.csv").read_text() == (again / "training.csv").read_text()
    out = tmp_path / "eval"
    result = _invoke(
        "evaluate", "--checkpoint", str(first / "agent.pt"), *DATA, "--bases", "fcfs",
        "--windows", "2", "--window-size", "64", "--out", str(out),
    )  # fmt: skip
    assert AGENTS[agent] in result.output
    report = json.loads((out / "evaluation.json").read_text())
    assert len(report["agents"][AGENTS[agent]]) == 2


def test_an_unknown_agent_is_a_one_line_error():
    result = runner.invoke(typer_app, ["jobs", "train", *DATA, "--agent", "alphago"])
    assert result.exit_code != 0 and isinstance(result.exception, UnknownNameError)
    assert "unknown agent 'alphago'; known: rltune, rlscheduler, schedinspector" in str(
        result.exception
    )
