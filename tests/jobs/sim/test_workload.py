"""What `simulate` replays: arrival compression, cluster slices and fixed windows (the same
transformations train/evaluate use), mean ± CI over windows, and the CLI options for them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import HetschedError
from hetsched.jobs.rl.scenario import load_scenario
from hetsched.jobs.sim.comparison import simulation_workload
from hetsched.jobs.traces.source import load_jobs
from hetsched.jobs.traces.transforms import compress_arrivals, fixed_window

runner = CliRunner()


def test_compression_and_fixed_windows():
    jobs = load_jobs("sample:alibaba2023").jobs
    dense = compress_arrivals(jobs, 4.0)
    assert np.allclose(dense.submit_time_s * 4.0, jobs.submit_time_s)
    assert np.array_equal(dense.run_time_s, jobs.run_time_s)
    assert compress_arrivals(jobs, 1.0) is jobs
    for bad in (0.0, -2.0, math.inf):
        with pytest.raises(HetschedError, match="must be > 0"):
            compress_arrivals(jobs, bad)
    window = fixed_window(jobs, 100, 50)
    assert len(window) == 50 and window.submit_time_s[0] == 0
    assert window.id.tolist() == jobs.id[100:150].tolist()
    with pytest.raises(HetschedError, match=r"--start must be 0 \.\. 675"):
        fixed_window(jobs, 700, 50)


def test_simulate_and_train_scenarios_compress_and_slice_alike():
    loaded = load_jobs("sample:alibaba2023")
    workload = simulation_workload(loaded, cluster_fraction=0.5, time_scale=3.0, estimate="oracle")
    scenario = load_scenario(
        "sample:alibaba2023", cluster_fraction=0.5, arrival_compression=3.0, estimate="oracle"
    )
    assert np.array_equal(workload.jobs.submit_time_s, scenario.jobs.submit_time_s)
    assert [n.name for n in workload.cluster.nodes] == [n.name for n in scenario.cluster.nodes]
    assert workload.cluster.total_gpus < loaded.cluster.total_gpus


def test_window_options_that_exclude_each_other():
    loaded = load_jobs("sample:alibaba2023")
    with pytest.raises(HetschedError, match="--start needs --window"):
        simulation_workload(loaded, start=10)
    with pytest.raises(HetschedError, match="exclude each other"):
        simulation_workload(loaded, window=100, random_windows=3)


def test_simulate_cli_replays_a_compressed_fixed_window_with_a_slice(tmp_path):
    out = tmp_path / "w"
    result = runner.invoke(
        typer_app,
        [
            "jobs", "simulate", "--trace", "sample:alibaba2023", "--policy", "fcfs,sjf",
            "--time-scale", "4", "--cluster-fraction", "0.5", "--window", "200", "--start", "100",
            "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "arrivals x4" in result.output and "(window of 200 jobs" in result.output
    payload = json.loads((out / "results.json").read_text())
    assert payload["time_scale"] == 4.0 and payload["cluster_fraction"] == 0.5
    assert payload["fixed_window"] == {"start": 100, "jobs": 200}
    assert (out / "jobs_fcfs_greedy.csv").read_text().count("\n") == 201


def test_random_windows_report_mean_and_ci(tmp_path):
    out = tmp_path / "ci"
    result = runner.invoke(
        typer_app,
        [
            "jobs", "simulate", "--trace", "sample:alibaba2023", "--policy", "fcfs",
            "--arrival-compression", "4", "--windows", "3", "--window-size", "150",
            "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "±" in result.output
    row = json.loads((out / "results.json").read_text())["results"][0]
    assert row["windows"] == 3 and row["bsld_ci95"] >= 0
    header = (out / "results.csv").read_text().splitlines()[0]
    assert header.startswith("policy,queue_mode,windows,bsld") and "bsld_ci95" in header
