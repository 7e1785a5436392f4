"""RLScheduler's kernel on GPU jobs: its four-feature observation, masking of padded and
unstartable slots, its negated-metric reward, and its checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.agent import JobScoringAgent, load_checkpoint, save_checkpoint
from hetsched.jobs.rl.environment import DecisionPolicy, PrioritisationEnv
from hetsched.jobs.rl.episodes import EpisodeSampler, normalised_gap
from hetsched.jobs.rl.features import build_features
from hetsched.jobs.rl.policy import policy_from_checkpoint
from hetsched.jobs.rl.rlscheduler_features import (
    RLSCHEDULER_FEATURES,
    RLSCHEDULER_QUEUE,
    build_rlscheduler_features,
)
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator

QUEUE = 16


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _CheckingPolicy:
    """FCFS that, at every pass, compares RLScheduler's observation with Table 3's features."""

    name = "check"
    starts_per_pass = 1

    def __init__(self) -> None:
        self.checked = 0

    def score(self, state: QueueState) -> np.ndarray:
        ours = build_rlscheduler_features(state, QUEUE)
        full = build_features(state, QUEUE)
        visible = len(full.queue)
        expected = np.column_stack([full.table[name] for name in RLSCHEDULER_FEATURES])
        assert ours.observation.shape == (QUEUE, 4)
        assert np.allclose(ours.observation[:visible], expected)
        assert not ours.observation[visible:].any()
        assert np.array_equal(ours.critic, ours.observation)
        assert np.array_equal(ours.can_start, full.can_start)
        self.checked += 1
        return np.arange(len(state.queue), dtype=np.float64)


def test_observation_is_wait_requested_time_gpus_and_fits_now(small):
    jobs, cluster = small
    policy = _CheckingPolicy()
    Simulator(jobs.window(0, 80), cluster, policy, SimulationConfig()).run()
    assert policy.checked > 20
    assert RLSCHEDULER_QUEUE == 128  # RLScheduler's MAX_QUEUE_SIZE


def test_kernel_picks_only_visible_jobs_that_can_start(small):
    jobs, cluster = small
    torch.manual_seed(0)
    agent = JobScoringAgent(QUEUE, feature_set="rlscheduler")
    assert agent.actor_hidden == (32, 16, 8) and agent.critic_hidden == (64, 32, 8)
    picks: list[tuple[np.ndarray, np.ndarray, int]] = []

    def choose(obs: np.ndarray, mask: np.ndarray) -> int:
        out = agent.get_action_and_value(
            torch.from_numpy(obs).unsqueeze(0), torch.from_numpy(mask).unsqueeze(0)
        )
        picks.append((obs, mask, int(out.action)))
        return picks[-1][2]

    episodes = EpisodeSampler(jobs, cluster, episode_jobs=96)
    outcome = episodes.play(lambda: DecisionPolicy(choose, QUEUE, "rlscheduler"))
    assert outcome.decisions == len(picks) > 10
    for obs, mask, action in picks:
        assert mask[action] and mask.sum() >= 2
        # The mask is the observation's can_schedule_now column: a padded slot (all zeros) or a
        # job that does not fit now is never in it.
        fits_now = obs[: QUEUE * 4].reshape(QUEUE, 4)[:, 3] > 0.5
        assert np.array_equal(mask, fits_now)


def test_a_slot_outside_the_mask_is_never_started_first(small):
    jobs, cluster = small
    window = jobs.window(40, 120)
    firsts: list[bool] = []

    class Recording(DecisionPolicy):
        def score(self, state: QueueState) -> np.ndarray:
            scores = super().score(state)
            if self.decisions > len(firsts):
                features = build_rlscheduler_features(state, QUEUE)
                firsts.append(bool(features.can_start[int(np.argmin(scores))]))
            return scores

    padded = Recording(lambda obs, mask: QUEUE - 1, QUEUE, "rlscheduler")
    result = Simulator(window, cluster, padded, SimulationConfig()).run()
    assert result.finished.all() and len(firsts) > 5 and all(firsts)


def test_reward_is_the_negated_metric(small):
    jobs, cluster = small
    env = PrioritisationEnv(
        jobs, cluster, "sjf", "bsld", 64, QUEUE, feature_set="rlscheduler", reward="metric"
    )
    obs, info = env.reset(seed=3)
    assert obs.shape == (QUEUE * 8,)
    done, reward = False, 0.0
    while not done:
        obs, reward, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    outcome = info["episode"]
    assert reward == outcome.reward == pytest.approx(-outcome.rl)
    assert outcome.improvement == pytest.approx(normalised_gap(outcome.base, outcome.rl, "bsld"))
    env.close()


def test_checkpoint_keeps_the_kind_and_the_window(tmp_path):
    torch.manual_seed(1)
    agent = JobScoringAgent(feature_set="rlscheduler")
    path = tmp_path / "rls.pt"
    save_checkpoint(path, agent, {"base_policy": "fcfs", "metric": "bsld"})
    loaded, meta = load_checkpoint(path)
    assert isinstance(loaded, JobScoringAgent) and loaded.feature_set == "rlscheduler"
    assert loaded.max_queue == RLSCHEDULER_QUEUE and meta["metric"] == "bsld"
    ov = torch.rand(1, RLSCHEDULER_QUEUE, 4)
    assert torch.equal(agent.logits(ov), loaded.logits(ov))
    assert policy_from_checkpoint(path).policy.name == "RLScheduler"
