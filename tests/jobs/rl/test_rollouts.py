"""Rollout workers without Ray: a trajectory depends on (seed, epoch, number) only, so training
gives the same agent however the trajectories are dealt out; updates group the epoch's
trajectories."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from hetsched.jobs.rl.rollouts import (
    RolloutWorker,
    Trajectory,
    TrajectoryTask,
    Weights,
    agent_weights,
    build_agent,
)
from hetsched.jobs.rl.train_config import TrainConfig
from hetsched.jobs.rl.training import train_agent, update_tasks

TINY = TrainConfig(
    epochs=2,
    trajectories_per_epoch=5,
    trajectories_per_update=3,
    episode_jobs=64,
    max_queue=32,
    seed=3,
)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """As the command line and the Ray actors run: one intra-op thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _TwoWorkersBackwards:
    """Two in-process workers, each given every other task, playing them last to first: what
    any number of Ray actors finishing in any order amounts to."""

    def __init__(self, workers: list[RolloutWorker]) -> None:
        self.workers = workers
        self.calls = 0

    def run(self, weights: Weights, tasks: Sequence[TrajectoryTask]) -> list[Trajectory]:
        self.calls += 1
        played: dict[TrajectoryTask, Trajectory] = {}
        for k, worker in enumerate(self.workers):
            share = list(tasks)[k :: len(self.workers)][::-1]
            played.update(zip(share, worker.run(weights, share), strict=True))
        return [played[task] for task in tasks]


def _same(a: Trajectory, b: Trajectory) -> bool:
    return (
        a.outcome == b.outcome
        and a.actions == b.actions
        and a.log_probs == b.log_probs
        and all(np.array_equal(x, y) for x, y in zip(a.obs, b.obs, strict=True))
    )


def test_a_trajectory_depends_on_seed_epoch_and_number_only(small):
    jobs, cluster = small
    weights = agent_weights(build_agent(TINY))
    first = RolloutWorker(jobs, cluster, TINY)
    tasks = [TrajectoryTask(1, n) for n in range(4)]
    before = torch.get_rng_state()
    forward = first.run(weights, tasks)
    assert torch.equal(torch.get_rng_state(), before)  # the learner's generator is untouched
    backward = RolloutWorker(jobs, cluster, TINY).run(weights, tasks[::-1])[::-1]
    assert all(_same(a, b) for a, b in zip(forward, backward, strict=True))
    assert all(t.outcome.decisions > 0 and len(t.actions) == t.outcome.decisions for t in forward)
    assert len({t.outcome.start for t in forward}) > 1  # each number draws its own episode
    other_seed = RolloutWorker(jobs, cluster, TINY.model_copy(update={"seed": 4}))
    assert not _same(other_seed.run(weights, tasks[:1])[0], forward[0])


def test_training_is_the_same_however_trajectories_are_dealt(small, tmp_path: Path):
    jobs, cluster = small
    alone = train_agent(jobs, cluster, TINY, tmp_path / "alone")
    backend = _TwoWorkersBackwards([RolloutWorker(jobs, cluster, TINY) for _ in range(2)])
    split = train_agent(jobs, cluster, TINY, tmp_path / "split", rollouts=backend)
    assert backend.calls == 4  # 2 epochs x updates of 3 + 2 trajectories
    assert alone.history == split.history
    first, second = alone.agent.state_dict(), split.agent.state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert alone.history[-1]["trajectories"] == 10


def test_updates_group_the_epoch_in_order():
    groups = update_tasks(2, TINY)
    assert [[task.number for task in group] for group in groups] == [[0, 1, 2], [3, 4]]
    assert {task.epoch for group in groups for task in group} == {2}


def test_a_negative_seed_is_refused():
    with pytest.raises(ValueError, match="seed"):
        TrainConfig(seed=-1)
