"""Rollout workers: who plays the training episodes for the one learner of :mod:`.training`.

The learner owns the agent and the optimiser; a worker owns its own episode sampler (simulator and
base-policy cache) and its own copy of the agent, receives the current weights as NumPy arrays
(never a pickled file) and plays the trajectories it is given. Trajectory ``i`` of epoch ``e``
draws its episode starts and its sampled actions from generators seeded by ``(seed, e, i)`` alone
(:func:`trajectory_seeds`), so the same trajectories come back whichever worker plays them and
however many workers there are: training is identical for one in-process worker and for any number
of Ray actors (:mod:`.ray_rollouts`). The learner's own torch generator (initial weights, PPO
minibatch order) is never drawn from by a rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import torch

from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.rl.agent import JobsAgent, JobScoringAgent
from hetsched.jobs.rl.environment import DecisionPolicy
from hetsched.jobs.rl.episodes import Chooser, DecidingPolicy, EpisodeOutcome, EpisodeSampler
from hetsched.jobs.rl.inspector import InspectorPolicy
from hetsched.jobs.rl.inspector_agent import InspectorAgent
from hetsched.jobs.rl.inspector_features import INSPECTOR_QUEUE
from hetsched.jobs.rl.train_config import AGENTS, TrainConfig
from hetsched.jobs.traces.job_table import JobTable

Weights = dict[str, np.ndarray]
"""An agent's ``state_dict`` as NumPy arrays: what the learner sends its workers."""


class TrajectoryTask(NamedTuple):
    """Which trajectory to play: its epoch (from 1) and its number within the epoch (from 0)."""

    epoch: int
    number: int


@dataclass
class Trajectory:
    """One episode's decisions and its outcome."""

    outcome: EpisodeOutcome
    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


class RolloutBackend(Protocol):
    """Plays trajectories with given weights and returns them in the order of ``tasks``."""

    def run(self, weights: Weights, tasks: Sequence[TrajectoryTask]) -> list[Trajectory]:
        """The trajectories of ``tasks``, played by an agent with ``weights``."""
        ...


def trajectory_seeds(seed: int, task: TrajectoryTask) -> tuple[int, int]:
    """(episode-start seed, action-sampling seed) of ``task`` in the run seeded ``seed``.

    A function of the three numbers only (NumPy's ``SeedSequence`` spreads them into independent
    streams), so a trajectory does not depend on which worker plays it or what it played before.
    """
    start_seed, action_seed = np.random.SeedSequence(
        [seed, task.epoch, task.number]
    ).generate_state(2)
    return int(start_seed), int(action_seed)


def build_agent(config: TrainConfig) -> JobsAgent:
    """A fresh agent of ``config.agent`` with the config's window and widths (or its paper's)."""
    if config.agent == InspectorAgent.KIND:
        return InspectorAgent(
            config.max_queue or INSPECTOR_QUEUE,
            config.actor_hidden or (32, 16),
            config.max_rejections,
        )
    return JobScoringAgent(
        config.max_queue, config.actor_hidden, config.critic_hidden, feature_set=config.agent
    )


def episode_policy(agent: JobsAgent, base_policy: str) -> Callable[[Chooser], DecidingPolicy]:
    """How an episode asks ``agent``: a fresh decision policy around a chooser (the inspector's
    over a fresh ``base_policy``)."""
    if isinstance(agent, InspectorAgent):
        return lambda choose: InspectorPolicy(
            make_policy(base_policy), choose, agent.max_queue, agent.max_rejections
        )
    return lambda choose: DecisionPolicy(choose, agent.max_queue, agent.feature_set)


def agent_weights(agent: JobsAgent) -> Weights:
    """The agent's weights as NumPy arrays (copies: the optimiser updates the tensors in place)."""
    return {
        name: tensor.detach().cpu().numpy().copy() for name, tensor in agent.state_dict().items()
    }


def load_weights(agent: JobsAgent, weights: Weights) -> None:
    """Loads ``weights`` (from :func:`agent_weights`) into ``agent``."""
    agent.load_state_dict({name: torch.tensor(array) for name, array in weights.items()})


def rollout(
    episodes: EpisodeSampler,
    agent: JobsAgent,
    policy_for: Callable[[Chooser], DecidingPolicy],
) -> Trajectory:
    """Plays one episode with actions sampled from the agent's masked softmax (torch's global
    generator: :meth:`RolloutWorker.play` seeds it per trajectory)."""
    obs_seen: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    log_probs: list[float] = []
    values: list[float] = []

    def choose(obs: np.ndarray, mask: np.ndarray) -> int:
        with torch.no_grad():
            out = agent.get_action_and_value(
                torch.from_numpy(obs).unsqueeze(0), torch.from_numpy(mask).unsqueeze(0)
            )
        obs_seen.append(obs)
        masks.append(mask)
        actions.append(int(out.action.item()))
        log_probs.append(out.log_prob.item())
        values.append(out.value.item())
        return actions[-1]

    outcome = episodes.play(lambda: policy_for(choose))
    rewards = [0.0] * len(actions)
    rewards[-1] = outcome.reward  # the episode's one reward (RLTune section 3.2)
    return Trajectory(outcome, obs_seen, masks, actions, log_probs, values, rewards)


class RolloutWorker:
    """Plays trajectories in this process; a Ray actor wraps the same class
    (:mod:`.ray_rollouts`).

    Args:
        jobs: Training jobs (requested times filled), in submission order.
        cluster: The cluster.
        config: The training settings (agent, base policy, metric, episode length, seed, ...).
    """

    def __init__(self, jobs: JobTable, cluster: Cluster, config: TrainConfig) -> None:
        self.seed = config.seed
        self.episodes = EpisodeSampler(
            jobs,
            cluster,
            config.base_policy,
            config.metric,
            config.episode_jobs,
            config.placer,
            AGENTS[config.agent],
        )
        with torch.random.fork_rng(devices=[]):  # its initial weights are overwritten by run()
            self.agent = build_agent(config)
        self.policy_for = episode_policy(self.agent, config.base_policy)

    def play(self, task: TrajectoryTask) -> Trajectory:
        """Plays ``task`` with generators seeded from (seed, epoch, number) only; torch's global
        generator is restored afterwards, so the caller's stream is untouched."""
        start_seed, action_seed = trajectory_seeds(self.seed, task)
        self.episodes.seed_starts(start_seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(action_seed)
            return rollout(self.episodes, self.agent, self.policy_for)

    def run(self, weights: Weights, tasks: Sequence[TrajectoryTask]) -> list[Trajectory]:
        """Loads ``weights`` and plays ``tasks`` in order."""
        load_weights(self.agent, weights)
        return [self.play(task) for task in tasks]
