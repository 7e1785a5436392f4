"""Checkpoints of several training seeds (all called ``agent.pt``) get a row each in
``hetsched jobs evaluate``: none silently replaces another."""

from __future__ import annotations

from pathlib import Path

import torch

from hetsched.jobs.rl.agent import JobScoringAgent, save_checkpoint
from hetsched.jobs.rl.evaluation import agent_label, evaluate_agents


def test_same_named_checkpoints_of_three_seeds_get_three_rows(small, tmp_path: Path):
    jobs, cluster = small
    paths = []
    for seed in range(3):
        torch.manual_seed(seed)
        path = tmp_path / f"rl-s{seed}" / "agent.pt"
        save_checkpoint(path, JobScoringAgent(32), {"base_policy": "fcfs"})
        paths.append(path)
    report = evaluate_agents(jobs, cluster, paths, ("fcfs",), windows=1, window_size=64)
    assert list(report.agents) == ["RL-fcfs", "RL-fcfs(agent)", "RL-fcfs(rl-s2/agent)"]


def test_labels_are_numbered_when_names_run_out():
    path = Path("x/agent.pt")
    taken = {"RL-fcfs", "RL-fcfs(agent)", "RL-fcfs(x/agent)", "RL-fcfs(#4)"}
    assert agent_label("RL-fcfs", path, taken) == "RL-fcfs(#5)"
    assert agent_label("RL-sjf", path, taken) == "RL-sjf"
