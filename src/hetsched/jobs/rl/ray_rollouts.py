"""Rollout workers as Ray actors, on this machine or on a Ray cluster (``--workers N --address``).

Each actor is a :class:`.rollouts.RolloutWorker` on one CPU: its own simulator, episode sampler
and copy of the agent. The scenario (training jobs and cluster) travels to the actors once through
Ray's object store; before each update the learner puts the current weights there (a dict of
NumPy arrays, :func:`.rollouts.agent_weights`), and the update's trajectories are handed out one at
a time to whichever actor is free, so a long episode does not hold up a whole share. Results come
back in task order, and every trajectory seeds itself from (seed, epoch, number), so the trained
agent is the same for one actor, eight, or the in-process worker.

Parallelism is bounded by ``trajectories_per_update``: the trajectories of one update are all
played with the same weights, and the next update's wait for the learner.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ray
import torch

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.model import Cluster
from hetsched.jobs.rl.rollouts import (
    RolloutBackend,
    RolloutWorker,
    Trajectory,
    TrajectoryTask,
    Weights,
)
from hetsched.jobs.rl.train_config import TrainConfig
from hetsched.jobs.traces.job_table import JobTable


class _ActorWorker(RolloutWorker):
    """The worker as a Ray actor: single-threaded torch, because a decision's tensors are one
    queue and each actor already has a CPU of its own (intra-op threads only contend)."""

    def __init__(self, jobs: JobTable, cluster: Cluster, config: TrainConfig) -> None:
        torch.set_num_threads(1)
        super().__init__(jobs, cluster, config)

    def ready(self) -> bool:
        """Answers once the actor is built, so a start-up failure surfaces at start."""
        return True


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fails fast on a ``HOST:PORT`` or ``ray://HOST:PORT`` nothing answers at: Ray itself keeps
    retrying a dead address for minutes. ``auto`` (the local cluster's address file) is left to
    Ray.

    Raises:
        HetschedError: For an address without a port or one that refuses or times out.
    """
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise HetschedError(f"Ray address {address!r} is not auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, OverflowError) as error:
        raise HetschedError(f"cannot reach Ray at {address}: {error}") from None


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Joins the Ray cluster at ``address`` (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``) or,
    with None, starts a local session with ``num_cpus`` CPUs. Nothing happens when Ray is already
    initialised in this process.

    Returns:
        Whether this call started the session (and so should shut it down).

    Raises:
        HetschedError: When Ray cannot start or the address cannot be reached.
    """
    if ray.is_initialized():
        return False
    if address is not None:
        check_reachable(address)
    try:
        local = address is None
        ray.init(
            address=address,
            num_cpus=num_cpus if local else None,
            include_dashboard=False,
            log_to_driver=False,
            # Ray starts workers at niceness 15: on a busy host the actors then wait behind every
            # other process (measured: 4 trajectories took 52 s on one actor, 5 s in process).
            _system_config={"worker_niceness": 0} if local else None,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = address or "a local session"
        raise HetschedError(f"cannot start or reach Ray at {where}: {error}") from None
    return True


class RayRollouts:
    """``workers`` Ray actors playing trajectories for the learner (a :class:`RolloutBackend`).

    Args:
        jobs: Training jobs (requested times filled), in submission order.
        cluster: The cluster.
        config: The training settings.
        workers: Number of actors (>= 1), one CPU each.
        address: Ray cluster to join (None: a local session with ``workers`` CPUs, unless Ray is
            already initialised in this process).

    Raises:
        HetschedError: For ``workers < 1``, or when Ray cannot start or reach the cluster.
    """

    def __init__(
        self,
        jobs: JobTable,
        cluster: Cluster,
        config: TrainConfig,
        workers: int,
        address: str | None = None,
    ) -> None:
        if workers < 1:
            raise HetschedError(f"Ray rollouts need at least one worker, got {workers}")
        RolloutWorker(jobs, cluster, config)  # a bad setting fails here, before Ray starts
        self.owns_ray = start_ray(address, workers)
        actor_class = ray.remote(num_cpus=1)(_ActorWorker)
        jobs_ref, cluster_ref = ray.put(jobs), ray.put(cluster)
        self.actors: list[Any] = [
            actor_class.remote(jobs_ref, cluster_ref, config) for _ in range(workers)
        ]
        self._get([actor.ready.remote() for actor in self.actors])

    @staticmethod
    def _get(refs: Any) -> Any:
        """``ray.get``, re-raising a worker's own HetschedError (e.g. no episode with a decision)
        as itself, so the command line prints its one line."""
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as error:
            if isinstance(error.cause, HetschedError):
                raise error.cause from None
            raise

    def run(self, weights: Weights, tasks: Sequence[TrajectoryTask]) -> list[Trajectory]:
        """Plays ``tasks`` with ``weights``, one task at a time per free actor; returns them in
        the order of ``tasks``."""
        weights_ref = ray.put(weights)
        waiting = deque(enumerate(tasks))
        running: dict[Any, tuple[Any, int]] = {}
        played: dict[int, Trajectory] = {}

        def hand_out(actor: Any) -> None:
            position, task = waiting.popleft()
            running[actor.run.remote(weights_ref, [task])] = (actor, position)

        for actor in self.actors[: len(waiting)]:
            hand_out(actor)
        while running:
            [done], _ = ray.wait(list(running), num_returns=1)
            actor, position = running.pop(done)
            played[position] = self._get(done)[0]
            if waiting:
                hand_out(actor)
        return [played[position] for position in range(len(tasks))]

    def close(self) -> None:
        """Stops the actors, and the Ray session if this object started it."""
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.owns_ray:
            ray.shutdown()


@contextmanager
def open_rollouts(
    jobs: JobTable,
    cluster: Cluster,
    config: TrainConfig,
    workers: int = 0,
    address: str | None = None,
) -> Iterator[RolloutBackend]:
    """The rollout backend of ``hetsched jobs train --workers N [--address A]``: 0 workers, one
    worker in this process (no Ray); N >= 1, N Ray actors, stopped on exit.

    Raises:
        HetschedError: For a negative worker count, an address without workers, or a Ray that
            cannot start.
    """
    if workers < 0:
        raise HetschedError(f"--workers must be >= 0 (0 = in this process), got {workers}")
    if workers == 0:
        if address is not None:
            raise HetschedError("--address needs --workers >= 1 (Ray actors)")
        yield RolloutWorker(jobs, cluster, config)
        return
    rollouts = RayRollouts(jobs, cluster, config, workers, address)
    try:
        yield rollouts
    finally:
        rollouts.close()
