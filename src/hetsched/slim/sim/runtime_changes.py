"""Runtime changes of a simulated cluster: a server slows down, or fails and comes back.

The Slim Scheduler exists to adapt to "fluctuating runtime conditions"; a scenario shows that only
if conditions change while it runs. Two changes are modelled on the simulated device
(:class:`~hetsched.slim.sim.simulated_backend.SimulatedBackend`), timed as fractions of the
workload's arrival span so that a longer run keeps the same story:

* ``slowdown``: from ``start_fraction`` to ``end_fraction`` every batch that starts takes
  ``factor`` times longer (a co-tenant or thermal throttling); batches already running keep their
  pace (the backend times a batch when it starts).
* ``outage``: the server fails at ``start_fraction`` and returns at ``end_fraction``. While it is
  down its executor starts no batch (:meth:`~hetsched.slim.executor.greedy.GreedyExecutor.pause`;
  batches already running finish, then the device idles), and the cluster marks it unavailable,
  so routers that read
  :attr:`~hetsched.slim.routers.base.ServerView.available` send nothing new there. Requests already
  queued on it wait for its return: a failure costs them their deadline, as it would.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Literal

from pydantic import Field, model_validator

from hetsched.core.config import StrictModel
from hetsched.core.events import EventLoop
from hetsched.slim.cluster.slim_cluster import SlimCluster
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.sim.simulated_backend import SimulatedBackend


class RuntimeChange(StrictModel, use_attribute_docstrings=True):
    """One change of one server during a run."""

    kind: Literal["slowdown", "outage"]
    """``slowdown``: batches compute ``factor`` times slower; ``outage``: the server is down."""
    server: int = Field(ge=0)
    """Index of the server in the scenario's ``servers``."""
    start_fraction: float = Field(ge=0, lt=1)
    """When it starts, as a fraction of the time from the first to the last arrival."""
    end_fraction: float = Field(1.0, gt=0, le=1)
    """When it ends (1.0: at the last arrival; a slowdown then lasts until the run ends)."""
    factor: float = Field(2.0, ge=1)
    """``slowdown`` only: how many times slower the device computes."""

    @model_validator(mode="after")
    def _ends_after_start(self) -> RuntimeChange:
        if self.end_fraction <= self.start_fraction:
            raise ValueError(
                f"end_fraction {self.end_fraction} must be after start_fraction"
                f" {self.start_fraction}"
            )
        return self


def schedule_changes(
    changes: Sequence[RuntimeChange],
    loop: EventLoop,
    backends: Sequence[SimulatedBackend],
    executors: Sequence[GreedyExecutor],
    cluster: SlimCluster,
    first_arrival_s: float,
    last_arrival_s: float,
) -> None:
    """Schedules every change's start and end on ``loop`` (see the module docstring)."""
    span_s = last_arrival_s - first_arrival_s
    for change in changes:
        start_s = first_arrival_s + change.start_fraction * span_s
        end_s = first_arrival_s + change.end_fraction * span_s
        if change.kind == "slowdown":
            backend = backends[change.server]
            loop.schedule(start_s, partial(backend.set_slowdown, change.factor))
            if change.end_fraction < 1.0:
                loop.schedule(end_s, partial(backend.set_slowdown, 1.0))
        else:
            executor, index = executors[change.server], change.server
            loop.schedule(start_s, partial(_set_up, cluster, executor, index, False))
            loop.schedule(end_s, partial(_set_up, cluster, executor, index, True))


def _set_up(cluster: SlimCluster, executor: GreedyExecutor, index: int, up: bool) -> None:
    """The server fails (``up`` False) or returns; the router is told either way."""
    cluster.set_available(index, up)
    if up:
        executor.resume()
    else:
        executor.pause()
