"""`hetsched jobs train` / `evaluate` end to end with tiny budgets; determinism per seed; bad input;
a golden check on the real Alibaba GPU 2023 trace (skipped without ../shared/data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import DataError, HetschedError, UnknownNameError
from hetsched.jobs.cluster.slicing import slice_cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.environment import PrioritisationEnv
from hetsched.jobs.rl.policy import policy_by_name
from hetsched.jobs.rl.scenario import load_scenario, split_by_time
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator

runner = CliRunner()
DATA = ["--synthetic", "philly", "--jobs", "1500", "--cluster-fraction", "0.02"]
TINY = [
    "--epochs", "2", "--trajectories-per-epoch", "2", "--trajectories-per-update", "2",
    "--episode-jobs", "64", "--max-queue", "32",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # the commands pin torch to one thread


def _invoke(*args: str):
    result = runner.invoke(typer_app, ["jobs", *args])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result


def _fails(*args: str) -> BaseException:
    result = runner.invoke(typer_app, ["jobs", *args])
    assert result.exit_code != 0
    return result.exception


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rl") / "train"
    result = runner.invoke(typer_app, ["jobs", "train", *DATA, *TINY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "improvement" in result.output and "trained 4 episodes" in result.output
    return out


def test_train_writes_checkpoints_history_and_curve(trained):
    history = json.loads((trained / "training.json").read_text())
    assert [e["epoch"] for e in history["epochs"]] == [1, 2]
    assert history["config"]["base_policy"] == "fcfs" and history["config"]["max_queue"] == 32
    for epoch in history["epochs"]:
        assert -1.0 <= epoch["improvement"] <= 1.0 and epoch["decisions_per_episode"] > 0
        assert "losses/policy_loss" in epoch
    assert (trained / "checkpoints" / "epoch_002.pt").is_file()
    assert (trained / "agent.pt").is_file() and (trained / "training_curve.png").stat().st_size
    assert (trained / "training.csv").read_text().count("\n") == 3


def test_evaluate_prints_tables_and_saves_results(trained, tmp_path):
    out = tmp_path / "eval"
    result = _invoke(
        "evaluate", "--checkpoint", str(trained / "agent.pt"), *DATA, "--bases", "fcfs,sjf",
        "--windows", "2", "--window-size", "64", "--out", str(out),
    )  # fmt: skip
    assert "RL-fcfs vs sjf" in result.output and "trained on" in result.output
    report = json.loads((out / "evaluation.json").read_text())
    assert len(report["starts"]) == 2 and set(report["base"]) == {"fcfs", "sjf"}
    assert len(report["agents"]["RL-fcfs"]) == 2
    assert report["comparison"][1]["policy"] == "RL-fcfs vs fcfs"
    for name in ("comparison.csv", "transfer_wait_s.csv", "windows.csv", "box_wait_s.png"):
        assert (out / name).stat().st_size > 0
    # The same checkpoint also runs inside `hetsched jobs simulate`-style code by path.
    assert policy_by_name(str(trained / "agent.pt")).name == "RL-fcfs"


def test_simulate_takes_a_checkpoint_beside_policy_names(trained, tmp_path):
    out = tmp_path / "sim"
    checkpoint = str(trained / "agent.pt")
    data = ["--synthetic", "philly", "--jobs", "300"]
    _invoke("simulate", *data, "--policy", f"fcfs,{checkpoint}", "--out", str(out))
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [r["policy"] for r in rows] == ["fcfs", "RL-fcfs"]  # labelled by its base policy
    assert (out / "jobs_RL-fcfs_greedy.csv").stat().st_size > 0
    missing = _fails("simulate", *data, "--policy", str(tmp_path / "none.pt"), "--out", str(out))
    assert isinstance(missing, HetschedError) and "none.pt" in str(missing)


def test_training_is_deterministic_per_seed(trained, tmp_path):
    again = tmp_path / "again"
    _invoke("train", *DATA, *TINY, "--out", str(again))
    assert (again / "training.csv").read_text() == (trained / "training.csv").read_text()
    first = torch.load(trained / "agent.pt", weights_only=True)["state_dict"]
    second = torch.load(again / "agent.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(first[k], second[k]) for k in first)
    other = tmp_path / "other"
    _invoke("train", *DATA, *TINY, "--seed", "1", "--out", str(other))
    third = torch.load(other / "agent.pt", weights_only=True)["state_dict"]
    assert not all(torch.equal(first[k], third[k]) for k in first)


def test_bad_input_is_rejected_with_a_clear_message(tmp_path):
    garbage = tmp_path / "model.pt"
    garbage.write_text("no weights here")
    error = _fails("evaluate", "--checkpoint", str(garbage), *DATA)
    assert isinstance(error, DataError) and "model.pt: not a readable checkpoint" in str(error)
    error = _fails("evaluate", "--checkpoint", str(tmp_path / "absent.pt"), *DATA)
    assert isinstance(error, DataError) and "checkpoint not found" in str(error)
    error = _fails("train", *DATA, "--metric", "latency")
    assert "unknown metric 'latency'; known: wait, jct, bsld, util" in str(error)
    error = _fails("train", *DATA, "--base-policy", "fifo2")
    assert isinstance(error, UnknownNameError) and "unknown priority policy" in str(error)
    error = _fails("train", *DATA, "--placement", "tetris")
    assert isinstance(error, UnknownNameError) and "unknown placer 'tetris'" in str(error)
    error = _fails("train", "--synthetic", "philly", "--cluster-fraction", "0")
    assert isinstance(error, HetschedError) and "cluster fraction must be in (0, 1]" in str(error)
    error = _fails("train", *DATA, "--epochs", "0")
    assert isinstance(error, HetschedError) and "epochs" in str(error)


def test_slice_and_split(tmp_path):
    scenario = load_scenario(None, synthetic="helios", synthetic_jobs=200, cluster_fraction=0.25)
    # Helios: 5 VCs of 16/12/10/8/8 nodes -> ceil(25 %) = 4, 3, 3, 2, 2 nodes.
    assert len(scenario.cluster.nodes) == 14
    assert scenario.cluster.virtual_clusters == ["vc1", "vc2", "vc3", "vc4", "vc5"]
    assert len(scenario.train) == 180 and len(scenario.test) == 20
    assert scenario.train.submit_time_s[-1] <= scenario.test.submit_time_s[0]
    assert slice_cluster(scenario.cluster, 1.0) is scenario.cluster
    with pytest.raises(HetschedError, match="leaves a part empty"):
        split_by_time(scenario.jobs.take(np.arange(3)), 0.1)


def test_golden_alibaba_gpu_2023(shared_traces):
    """The scenario of the reported Alibaba run, pinned: slice, split, and the base policies on
    the first held-out window (numbers from this code at the time of writing)."""
    trace = shared_traces / "alibaba-gpu-2023" / "openb_pod_list_gpuspec33.csv"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    scenario = load_scenario(
        trace, cluster_fraction=0.01, arrival_compression=10, estimate="noisy", seed=0
    )
    assert (len(scenario.cluster.nodes), scenario.cluster.total_gpus) == (24, 111)
    assert (len(scenario.train), len(scenario.test)) == (6530, 725)
    window = scenario.test.window(0, 256)
    config = SimulationConfig(drop_unrunnable=True)
    expected = {"fcfs": (77.3152, 1.64180), "sjf": (79.5844, 1.48127)}
    for policy, (wait_s, bsld) in expected.items():
        summary = Simulator(window, scenario.cluster, make_policy(policy), config).run().summary()
        assert summary["wait_s"] == pytest.approx(wait_s, rel=1e-4)
        assert summary["bsld"] == pytest.approx(bsld, rel=1e-4)
    env = PrioritisationEnv(scenario.train, scenario.cluster, "fcfs", "wait")
    assert env.episodes.base_score(5337) == pytest.approx(124.2129, rel=1e-4)
