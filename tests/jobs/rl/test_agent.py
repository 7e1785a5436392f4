"""RLTune's agent: masking of padded slots, the shared per-job scorer, checkpoints, the policy
in the simulator, and the Gymnasium environment (check_env, determinism, rewards, bad input)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from hetsched.core.errors import DataError, HetschedError, UnknownNameError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.agent import JobScoringAgent, load_checkpoint, save_checkpoint
from hetsched.jobs.rl.environment import PrioritisationEnv
from hetsched.jobs.rl.episodes import normalised_gap
from hetsched.jobs.rl.features import CRITIC_FEATURES, OBS_FEATURES
from hetsched.jobs.rl.policy import policy_by_name, policy_from_checkpoint
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator

QUEUE = 16


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _obs(agent: JobScoringAgent, rows: int, rng: np.random.Generator) -> torch.Tensor:
    ov = np.zeros((agent.max_queue, OBS_FEATURES), np.float32)
    cv = np.zeros((agent.max_queue, CRITIC_FEATURES), np.float32)
    ov[:rows] = rng.random((rows, OBS_FEATURES))
    cv[:rows] = rng.random((rows, CRITIC_FEATURES))
    return torch.from_numpy(np.concatenate((ov.ravel(), cv.ravel()))).unsqueeze(0)


def test_padded_and_masked_slots_are_never_chosen():
    torch.manual_seed(0)
    agent = JobScoringAgent(max_queue=8)
    obs = _obs(agent, 3, np.random.default_rng(0))
    mask = torch.tensor([[True, False, True] + [False] * 5])
    picks = {int(agent.get_action_and_value(obs, mask).action) for _ in range(200)}
    assert picks == {0, 2}
    out = agent.get_action_and_value(obs, mask, action=torch.tensor([5]))
    assert out.log_prob.item() < -1e6  # a padded slot has probability 0


def test_padded_slot_contents_do_not_change_the_choice():
    torch.manual_seed(1)
    agent = JobScoringAgent(max_queue=8)
    rng = np.random.default_rng(1)
    obs = _obs(agent, 3, rng)
    mask = torch.tensor([[True] * 3 + [False] * 5])
    noisy = obs.clone()
    noisy[0, 3 * OBS_FEATURES : 8 * OBS_FEATURES] = torch.rand(5 * OBS_FEATURES)
    for action in range(3):
        a = torch.tensor([action])
        before = agent.get_action_and_value(obs, mask, a).log_prob
        after = agent.get_action_and_value(noisy, mask, a).log_prob
        assert torch.allclose(before, after)


def test_the_scorer_is_shared_across_jobs():
    torch.manual_seed(2)
    agent = JobScoringAgent(max_queue=6)
    ov = torch.rand(1, 6, OBS_FEATURES)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.allclose(agent.logits(ov)[0, perm], agent.logits(ov[:, perm])[0])
    # The same network serves any queue size: only the critic depends on max_queue.
    assert sum(p.numel() for p in JobScoringAgent(64).actor.parameters()) == sum(
        p.numel() for p in agent.actor.parameters()
    )


def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(3)
    agent = JobScoringAgent(max_queue=QUEUE, actor_hidden=(8, 4))
    path = tmp_path / "a.pt"
    save_checkpoint(path, agent, {"base_policy": "sjf", "metric": "bsld"})
    loaded, meta = load_checkpoint(path)
    assert meta == {"base_policy": "sjf", "metric": "bsld"}
    ov = torch.rand(1, QUEUE, OBS_FEATURES)
    assert torch.equal(agent.logits(ov), loaded.logits(ov))
    assert policy_from_checkpoint(path).policy.name == "RL-sjf"


def test_bad_checkpoints_are_rejected_with_the_file_named(tmp_path):
    with pytest.raises(DataError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a torch file at all")
    with pytest.raises(DataError, match=r"garbage\.pt: not a readable checkpoint"):
        load_checkpoint(garbage)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(DataError, match="not a hetsched jobs agent checkpoint"):
        load_checkpoint(foreign)
    bad_shape = tmp_path / "bad_shape.pt"
    save_checkpoint(bad_shape, JobScoringAgent(8), {})
    payload = torch.load(bad_shape, weights_only=True)
    payload["architecture"]["max_queue"] = 9
    torch.save(payload, bad_shape)
    with pytest.raises(DataError, match="weights do not match"):
        load_checkpoint(bad_shape)


def test_policy_plugs_into_the_simulator_by_path(small, tmp_path):
    jobs, cluster = small
    window = jobs.window(0, 120)
    path = tmp_path / "agent.pt"
    torch.manual_seed(4)
    save_checkpoint(path, JobScoringAgent(QUEUE), {"base_policy": "fcfs"})
    by_path = policy_by_name(str(path))
    loaded = policy_from_checkpoint(path).policy
    results = [Simulator(window, cluster, p, SimulationConfig()).run() for p in (by_path, loaded)]
    assert results[0].finished.all()
    assert np.array_equal(results[0].start_s, results[1].start_s)  # deterministic
    assert (results[0].start_s >= window.submit_time_s).all()
    with pytest.raises(DataError):
        policy_by_name(str(tmp_path / "nope.pt"))
    with pytest.raises(UnknownNameError):
        policy_by_name("rl-tune")


def test_environment_passes_check_env(small):
    jobs, cluster = small
    env = PrioritisationEnv(jobs, cluster, "fcfs", "wait", episode_jobs=48, max_queue=QUEUE)
    check_env(env, skip_render_check=True)
    env.close()


def test_episode_reward_is_the_normalised_gap_and_deterministic(small):
    jobs, cluster = small
    env = PrioritisationEnv(jobs, cluster, "sjf", "bsld", episode_jobs=64, max_queue=QUEUE)
    runs = []
    for _ in range(2):
        obs, info = env.reset(seed=7)
        first = obs.copy()
        done, steps, reward = False, 0, 0.0
        while not done:
            assert info["action_mask"].any() and obs.shape == env.observation_space.shape
            action = int(np.flatnonzero(info["action_mask"])[-1])  # youngest startable job
            obs, reward, done, _, info = env.step(action)
            steps += 1
        outcome = info["episode"]
        runs.append((first, steps, reward))
        assert steps == outcome.decisions >= 1
        assert reward == pytest.approx(normalised_gap(outcome.base, outcome.rl, "bsld"))
        assert outcome.base == pytest.approx(env.episodes.base_score(outcome.start))
    assert np.array_equal(runs[0][0], runs[1][0]) and runs[0][1:] == runs[1][1:]
    with pytest.raises(HetschedError, match="before reset"):
        env.step(0)


def test_normalised_gap_and_bad_environment_options(small):
    assert normalised_gap(100.0, 60.0, "wait") == pytest.approx(0.4)
    assert normalised_gap(60.0, 100.0, "wait") == pytest.approx(-0.4)
    assert normalised_gap(0.0, 0.5, "wait") == pytest.approx(-0.5)  # max(base, rl, 1)
    assert normalised_gap(40.0, 50.0, "util") == pytest.approx(0.2)  # higher is better
    jobs, cluster = small
    with pytest.raises(HetschedError, match="unknown metric 'latency'; known: wait, jct, bsld"):
        PrioritisationEnv(jobs, cluster, metric="latency")
    with pytest.raises(UnknownNameError, match="unknown priority policy 'fifo2'"):
        PrioritisationEnv(jobs, cluster, base_policy="fifo2")
    with pytest.raises(HetschedError, match="episodes of 999 jobs"):
        PrioritisationEnv(jobs, cluster, episode_jobs=999)
    big = Cluster([Node(f"n{i}", "P100x8", 8) for i in range(200)])
    env = PrioritisationEnv(jobs, big, episode_jobs=32, max_queue=QUEUE)
    with pytest.raises(HetschedError, match="no episode offered the agent a decision"):
        env.reset(seed=0)


def test_one_start_per_pass_does_not_change_a_static_order(small):
    # The RL policy re-scores after every start; for a fixed order that must not change anything,
    # so base and RL pipelines differ only by their priorities.
    jobs, cluster = small
    window = jobs.window(100, 150)
    for name in ("fcfs", "sjf"):
        plain = Simulator(window, cluster, make_policy(name), SimulationConfig()).run()
        stepped = Simulator(
            window, cluster, make_policy(name), SimulationConfig(starts_per_pass=1)
        ).run()
        assert np.array_equal(plain.start_s, stepped.start_s)
        assert stepped.passes > plain.passes
