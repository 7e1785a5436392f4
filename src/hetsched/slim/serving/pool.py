"""The servers as Ray actors, seen by the front as a :class:`~.blocks.ServerPool`.

The pool owns one :class:`~.actor.ServerActor` per configured server; up/down state and telemetry
are :class:`~.polled_pool.PolledServerPool`'s. Ray restarts a dead actor (``max_restarts``); the
next successful poll marks it up again, and the router may choose it from the next decision on (a
restarted server rejoins).

Ray errors are translated into the front's terms: a dead actor is a
:class:`~.front.ServerFailedError` (re-route the block), a lost input activation a
:class:`~.front.PayloadLostError` (restart the images), anything else the server raised is passed
on as a server error (fail the images with 500).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
from ray.exceptions import ObjectLostError, RayActorError, RayTaskError

from hetsched.core.devices import DeviceSpec
from hetsched.slim.serving.actor import ServerActor
from hetsched.slim.serving.blocks import (
    BlockItem,
    ItemResult,
    PayloadLostError,
    ServerFailedError,
)
from hetsched.slim.serving.config import ServerConfig
from hetsched.slim.serving.metrics import ServerSnapshot
from hetsched.slim.serving.polled_pool import PolledServerPool, ServerStartError, cause

SERVER_KEYS = ("format", "architecture", "state_dict")
"""What a server builds its model from; a training checkpoint also holds the optimizer's state
(twice the weights for AdamW), its schedule and history, which no server reads."""


def server_payload(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The part of a checkpoint a server needs. The rest would be copied into every actor's
    heap and kept in the object store for restarts: with the digits model's AdamW state, 85 of
    the checkpoint's 128 MiB."""
    return {key: checkpoint[key] for key in SERVER_KEYS if key in checkpoint}


def actor_environment(server: ServerConfig) -> dict[str, Any] | None:
    """The Ray runtime environment of ``server``'s actor (merged by Ray with the job's): its
    process's environment variables, set before torch runs anything, which the actor setting
    ``os.environ`` itself would not guarantee. None: the job's as it is."""
    variables = {
        name: str(value)
        for name, value in (
            ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", server.onednn_cache_capacity),
            ("LRU_CACHE_CAPACITY", server.torch_lru_cache_capacity),
        )
        if value is not None
    }
    return {"env_vars": variables} if variables else None


def unplaceable(servers: Sequence[ServerConfig], cluster_resources: dict[str, float]) -> str | None:
    """Why Ray cannot place the servers' actors on the cluster as it is (None if it can): an
    actor asking for a GPU the cluster lacks would otherwise wait, unplaced, until the start-up
    timeout, and the operator would learn only that it timed out."""
    for resource, needed in (
        ("GPU", sum(server.num_gpus for server in servers)),
        ("CPU", sum(server.num_cpus for server in servers)),
    ):
        available = cluster_resources.get(resource, 0.0)
        if needed > available:
            return (
                f"the servers reserve {needed:g} {resource}(s) in all and the Ray cluster has"
                f" {available:g} (a cuda device reserves one GPU; num_cpus sets the CPUs)"
            )
    return None


class RayServerPool(PolledServerPool):
    """One Ray actor per server, with cached telemetry and up/down state.

    Args:
        servers: The configured servers (router index order).
        checkpoint: The model checkpoint dict; what a server needs of it (:func:`server_payload`)
            is put once in the object store for every actor.
        executor_config: Algorithm 1's knobs for every executor.
        telemetry_interval_s: Seconds between two telemetry polls of each actor.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        checkpoint: dict[str, Any],
        executor_config: dict[str, Any],
        telemetry_interval_s: float = 0.2,
    ) -> None:
        super().__init__([server.name for server in servers], telemetry_interval_s)
        # Held for the pool's lifetime: Ray restarts a dead actor from these arguments.
        self._checkpoint_ref = ray.put(server_payload(checkpoint))
        self._actors = [
            ServerActor.options(  # type: ignore[attr-defined]  # ray.remote adds options()
                num_cpus=server.num_cpus,
                num_gpus=server.num_gpus,
                runtime_env=actor_environment(server),
            ).remote(
                server.name,
                self._checkpoint_ref,
                server.device,
                executor_config,
                server.spec,
                server.nice,
                server.torch_threads,
                server.compute_slots(server.torch_threads),
            )
            for server in servers
        ]

    async def start(self, timeout_s: float = 120.0) -> None:
        """Waits until every actor has loaded its model, then polls telemetry in the background.

        Raises:
            ServerStartError: Naming the server that failed to start and why.
        """
        for index, actor in enumerate(self._actors):
            try:
                snapshot = await asyncio.wait_for(_awaitable(actor.snapshot.remote()), timeout_s)
                spec = await asyncio.wait_for(_awaitable(actor.device_spec.remote()), timeout_s)
            except TimeoutError:
                raise ServerStartError(
                    f"server {self.names[index]!r} did not start within {timeout_s:g} s (Ray"
                    " could not place its actor, or its model did not load in time)"
                ) from None
            except (RayActorError, RayTaskError) as error:
                raise ServerStartError(
                    f"server {self.names[index]!r} did not start: {cause(error)}"
                ) from None
            self._snapshots[index] = snapshot
            self.specs.append(DeviceSpec.model_validate(spec))
            self._up[index] = True
        self._start_polling()

    async def stop(self) -> None:
        """Stops polling and ends every actor (no restart)."""
        await self._stop_polling()
        for actor in self._actors:
            ray.kill(actor, no_restart=True)

    # -- ServerPool -------------------------------------------------------------------------------

    async def run_block(
        self, index: int, width: float, items: Sequence[BlockItem]
    ) -> list[ItemResult]:
        refs = (
            self._actors[index]
            .run_block.options(num_returns=len(items) + 1)
            .remote(
                width,
                [item.segment for item in items],
                [item.prev_width for item in items],
                *(item.payload for item in items),
            )
        )
        try:
            metadata = await refs[0]
        except RayActorError as error:
            self._mark_down(index, error)
            raise ServerFailedError(f"{self.names[index]}: {cause(error)}") from None
        except ObjectLostError as error:
            raise PayloadLostError(str(error)) from None
        except RayTaskError as error:
            if isinstance(error.cause, ObjectLostError):
                raise PayloadLostError(str(error.cause)) from None
            raise RuntimeError(cause(error)) from None
        return [
            ItemResult(width_run, ref, queue_s, compute_s)
            for (width_run, queue_s, compute_s), ref in zip(metadata, refs[1:], strict=True)
        ]

    async def fetch(self, payload: Any) -> np.ndarray:
        try:
            return await payload
        except ObjectLostError as error:
            raise PayloadLostError(str(error)) from None

    # -- faults -----------------------------------------------------------------------------------

    async def pid(self, index: int) -> int:
        """Process id of server ``index``'s actor (to kill it from outside, as a crash would)."""
        return await self._actors[index].pid.remote()

    def kill(self, index: int, *, restart: bool = True) -> None:
        """Ends server ``index``'s actor; Ray restarts it unless ``restart`` is False."""
        ray.kill(self._actors[index], no_restart=not restart)

    DOWN_ERRORS = (RayActorError, RayTaskError)

    async def _read_snapshot(self, index: int) -> ServerSnapshot:
        return await self._actors[index].snapshot.remote()


async def _awaitable(ref: ray.ObjectRef) -> Any:
    """An object ref as a coroutine, so ``asyncio.wait_for`` can time it out."""
    return await ref
