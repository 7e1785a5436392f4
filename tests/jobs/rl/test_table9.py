"""RLTune's Table 9: rows, replicates and checkpoint order, confidence intervals, the paper's
values, and `hetsched jobs evaluate --table9` end to end (untrained agents, tiny windows)."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch
from scipy import stats
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import HetschedError
from hetsched.jobs.rl.agent import JobScoringAgent, save_checkpoint
from hetsched.jobs.rl.inspector_agent import InspectorAgent
from hetsched.jobs.rl.table9 import BEST_ROW, mean_and_ci95, paper_value, run_table9

QUEUE = 16


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _checkpoints(folder, rltune_seeds=(0, 1)):
    paths = []
    for seed in rltune_seeds:
        torch.manual_seed(seed)
        path = folder / f"rltune{seed}.pt"
        save_checkpoint(path, JobScoringAgent(QUEUE), {"base_policy": "fcfs", "seed": seed})
        paths.append(path)
    save_checkpoint(folder / "rls.pt", JobScoringAgent(QUEUE, feature_set="rlscheduler"), {})
    save_checkpoint(folder / "si.pt", InspectorAgent(QUEUE), {"base_policy": "fcfs"})
    return [folder / "si.pt", *reversed(paths), folder / "rls.pt"]


def test_mean_and_confidence_interval():
    mean, half = mean_and_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(stats.t.ppf(0.975, 2) / math.sqrt(3))  # sample std 1
    assert math.isnan(mean_and_ci95([4.0])[1])


def test_paper_values_are_table_9():
    assert paper_value("philly", "RLTune", "bsld") == 232.82
    assert paper_value("helios", "FIFO", "wait_s") == 7264.58
    assert paper_value("alibaba", "RLScheduler", "jct_s") == 14554.75
    assert paper_value("alibaba", "SchedInspector", "time_s") == 96.13  # one Time column
    assert paper_value("philly", BEST_ROW, "bsld") is None  # not in the paper
    assert paper_value("none", "FIFO", "bsld") is None


def test_rows_replicates_and_checkpoint_order(small, tmp_path):
    jobs, cluster = small
    paths = _checkpoints(tmp_path)
    table = run_table9(jobs, cluster, paths, "philly", 2, 0, 2, 64, heuristics=("sjf", "f1"))
    assert [row.row for row in table.rows] == ["FIFO", "SchedInspector", "RLScheduler", "RLTune"]
    assert [row.policy for row in table.rows] == [
        "fcfs", "SchedInspector-fcfs", "RLScheduler", "RL-fcfs",
    ]  # fmt: skip
    assert table.seeds == [0, 1] and all(len(row.replicates) == 2 for row in table.rows)
    fifo = table.rows[0]
    assert fifo.replicates[0]["bsld"] != fifo.replicates[1]["bsld"]  # other windows
    assert all(r["time_s"] > 0 for row in table.rows for r in row.replicates)
    bsld = {row.policy: row.stat("bsld")[0] for row in table.heuristics}
    assert table.best.policy == min(bsld, key=bsld.__getitem__)
    # Replicate r runs the r-th RLTune checkpoint by training seed, whatever the argument order.
    alone = run_table9(jobs, cluster, [paths[2]], "none", 1, 0, 2, 64, heuristics=("sjf",))
    untimed = [
        {k: v for k, v in row.replicates[0].items() if k != "time_s"}
        for row in (alone.rows[1], table.rows[3])
    ]
    assert untimed[0] == untimed[1]
    records = table.records()
    assert [r["row"] for r in records][-1] == BEST_ROW
    assert records[3]["bsld_paper"] == 232.82 and records[-1]["bsld_paper"] is None


def test_checkpoints_must_match_the_replicates(small, tmp_path):
    jobs, cluster = small
    with pytest.raises(HetschedError, match="2 rltune checkpoints for 3 replicates"):
        run_table9(jobs, cluster, _checkpoints(tmp_path), replicates=3, window_size=64)
    with pytest.raises(HetschedError, match="unknown Table 9 trace 'pai'"):
        run_table9(jobs, cluster, [], trace="pai")


def test_evaluate_prints_table_9_beside_the_paper(tmp_path):
    out = tmp_path / "eval"
    args = [f"--checkpoint={path}" for path in _checkpoints(tmp_path)]
    data = ["--synthetic", "philly", "--jobs", "1500", "--cluster-fraction", "0.02"]
    result = CliRunner().invoke(
        typer_app,
        ["jobs", "evaluate", *args, *data, "--bases", "fcfs,sjf,qssf", "--table9", "philly",
         "--replicates", "2", "--windows", "2", "--window-size", "64", "--out", str(out)],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("Table 9", "RLScheduler", "SchedInspector", "best heuristic", "1,298.06"):
        assert text in result.output
    with (out / "table9.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["row"] for r in rows] == [
        "FIFO", "SchedInspector", "RLScheduler", "RLTune", BEST_ROW,
    ]  # fmt: skip
    assert np.isfinite(float(rows[0]["time_s_ci95"]))
    bad = CliRunner().invoke(typer_app, ["jobs", "evaluate", *args, *data, "--table9", "pai"])
    assert bad.exit_code != 0 and "unknown Table 9 trace 'pai'" in str(bad.exception)
