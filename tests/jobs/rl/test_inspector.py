"""SchedInspector on the GPU simulator: a rejection holds the pass until the next event, the
inspector only delays the base policy's picks, it cannot starve a job (bounded consecutive
rejections, none while the cluster is idle), and its checkpoints and greedy verdicts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.agent import load_checkpoint, save_checkpoint
from hetsched.jobs.rl.inspector import ACCEPT, REJECT, InspectorPolicy
from hetsched.jobs.rl.inspector_agent import INITIAL_REJECT_PROBABILITY, InspectorAgent
from hetsched.jobs.rl.inspector_features import INSPECTOR_FEATURES
from hetsched.jobs.rl.policy import policy_from_checkpoint
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import Job, JobTable

CONFIG = SimulationConfig(drop_unrunnable=True)


class _Verdicts:
    """A scripted inspector: answers from ``answer``, records every observation."""

    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.observations: list[np.ndarray] = []

    def __call__(self, observation: np.ndarray, mask: np.ndarray) -> int:
        assert mask.all()  # asked only when rejecting is allowed
        self.observations.append(observation)
        return self.answer


def _run(jobs: JobTable, cluster, base: str, answer: int, max_rejections: int = 3):
    verdicts = _Verdicts(answer)
    policy = InspectorPolicy(make_policy(base), verdicts, 32, max_rejections)
    return Simulator(jobs, cluster, policy, CONFIG).run(), policy, verdicts


def test_accepting_everything_is_the_base_policy(small):
    jobs, cluster = small
    window = jobs.window(100, 120)
    for base in ("fcfs", "sjf"):
        inspected, policy, _ = _run(window, cluster, base, ACCEPT)
        plain = Simulator(window, cluster, make_policy(base), CONFIG).run()
        assert policy.decisions > 20 and policy.rejections == 0
        assert np.array_equal(inspected.start_s, plain.start_s)


def test_rejecting_everything_delays_but_starves_no_job(small):
    jobs, cluster = small
    window = jobs.window(100, 120)
    plain = Simulator(window, cluster, make_policy("sjf"), CONFIG).run()
    held, policy, verdicts = _run(window, cluster, "sjf", REJECT, max_rejections=3)
    assert held.finished.all()  # every job ran
    assert policy.rejections == policy.decisions > 20
    assert held.summary()["wait_s"] > plain.summary()["wait_s"]  # the holds cost waiting time
    # Asked at most 3 times in a row: the rejection counter it sees never reaches the bound.
    seen = np.array([obs[INSPECTOR_FEATURES.index("rejections")] for obs in verdicts.observations])
    assert seen.max() == pytest.approx(2 / 3) and set(np.round(seen * 3)) == {0, 1, 2}


def test_no_rejection_while_the_cluster_is_idle(hetero_cluster):
    # Jobs arrive one at a time, each finished before the next: every pick meets an idle cluster,
    # where a hold might wait for an arrival that never comes, so the inspector is never asked.
    jobs = JobTable.from_jobs(
        [Job(f"j{i}", 1000.0 * i, 100.0, 2, requested_time_s=100.0) for i in range(5)]
    )
    result, policy, _ = _run(jobs, hetero_cluster, "fcfs", REJECT)
    assert policy.decisions == 0
    assert np.array_equal(result.start_s, jobs.submit_time_s)


def test_observation_is_the_pick_and_the_system_in_unit_range(small):
    jobs, cluster = small
    _, _, verdicts = _run(jobs.window(0, 100), cluster, "fcfs", ACCEPT)
    observations = np.stack(verdicts.observations)
    assert observations.shape[1] == len(INSPECTOR_FEATURES) == 11
    assert observations.dtype == np.float32
    assert observations.min() >= 0.0 and observations.max() <= 1.0
    assert observations.std(axis=0)[:4].min() > 0  # the pick's features change with the pick


def test_agent_masks_reject_and_checkpoints_round_trip(tmp_path):
    torch.manual_seed(0)
    agent = InspectorAgent(max_queue=16, hidden=(8, 4), max_rejections=2)
    obs = torch.rand(64, len(INSPECTOR_FEATURES))
    # Untrained, it is its base policy with a little exploration (INITIAL_REJECT_PROBABILITY).
    reject = torch.softmax(agent.actor(obs), dim=-1)[:, REJECT]
    assert reject.detach().numpy() == pytest.approx(INITIAL_REJECT_PROBABILITY, abs=0.01)
    assert agent.decide(obs[0].numpy(), np.array([True, True])) == ACCEPT
    only_accept = torch.tensor([[True, False]]).expand(64, 2)
    assert (agent.get_action_and_value(obs, only_accept).action == ACCEPT).all()
    with torch.no_grad():
        agent.actor[-1].bias.copy_(torch.tensor([0.0, 5.0]))  # prefers to reject
    observation = obs[0].numpy()
    assert agent.decide(observation, np.array([True, True])) == REJECT
    assert agent.decide(observation, np.array([True, False])) == ACCEPT
    path = tmp_path / "inspector.pt"
    save_checkpoint(path, agent, {"base_policy": "sjf", "metric": "bsld"})
    loaded, meta = load_checkpoint(path)
    assert isinstance(loaded, InspectorAgent) and meta["base_policy"] == "sjf"
    assert (loaded.max_queue, loaded.hidden, loaded.max_rejections) == (16, (8, 4), 2)
    assert torch.equal(loaded.actor(obs), agent.actor(obs))
    policy = policy_from_checkpoint(path).policy
    assert isinstance(policy, InspectorPolicy) and policy.name == "SchedInspector-sjf"
    assert policy.base.name == "sjf" and policy.max_rejections == 2
