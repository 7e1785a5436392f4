"""Putting a serving system together from a :class:`~.config.ServeConfig`: Ray, servers, front.

:class:`ServingRuntime` starts one server per configured server (one per GPU, or two CPU servers,
when none are configured): a Ray actor each, after joining (or starting) a Ray session, or a
thread of this process with the ``local`` pool; then it builds the router and the front, and
tears it all down again. The HTTP layer (:mod:`.app`) holds one runtime.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
import torch

from hetsched.core.config import validate_config
from hetsched.core.devices import DeviceSpec
from hetsched.core.errors import ConfigError
from hetsched.core.events import WallClock
from hetsched.core.gc_pauses import freeze_startup_objects, thaw_startup_objects
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.model.checkpoint import load_checkpoint
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.model.data import load_dataset
from hetsched.slim.routers import ROUTERS, Router
from hetsched.slim.routers.ppo import PPORouter
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.config import ServeConfig, default_servers
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import InputSpec
from hetsched.slim.serving.local_pool import LocalServerPool
from hetsched.slim.serving.metrics import ServingMetrics
from hetsched.slim.serving.pool import RayServerPool, unplaceable
from hetsched.slim.sim.device_predictions import device_completion_model

LOG = logging.getLogger(__name__)


def input_spec(checkpoint: dict[str, Any]) -> InputSpec:
    """The model's input shape and pixel normalisation, from the data set it was trained on."""
    dataset = load_dataset(checkpoint["config"]["data"])
    return InputSpec(
        channels=int(checkpoint["architecture"]["in_channels"]),
        image_size=int(dataset.test_images.shape[-1]),
        pixel_mean=dataset.pixel_mean,
        pixel_std=dataset.pixel_std,
        class_names=dataset.class_names,
    )


def build_router(config: ServeConfig, n_servers: int) -> Router:
    """A registered router by name (the shipped learned router included), or the PPO router of
    a checkpoint file.

    Raises:
        UnknownNameError: For a name that is neither registered nor a file.
        ConfigError: For a trained router that does not fit the servers or widths: the paper's
            encoder needs its exact server count, the extended ones at most their server slots.
    """
    path = Path(config.router)
    if config.router not in ROUTERS and (path.suffix == ".pt" or path.is_file()):
        router: Router = PPORouter(path, seed=config.router_seed)
    else:
        router = ROUTERS.create(config.router, seed=config.router_seed)
    if isinstance(router, PPORouter):
        encoder = router.encoder
        fits = (
            n_servers == encoder.n_servers
            if encoder.kind == "paper"
            else (n_servers <= encoder.n_servers)
        )
        if not fits:
            raise ConfigError(
                f"router: {config.router} was trained for"
                f" {'' if encoder.kind == 'paper' else 'at most '}{encoder.n_servers} servers,"
                f" the config has {n_servers}"
            )
        if not set(encoder.widths) <= set(config.widths):
            raise ConfigError(
                f"router: {config.router} chooses widths {encoder.widths}, not all in"
                f" {config.widths}"
            )
    return router


def front_completion(
    specs: Sequence[DeviceSpec], spec: InputSpec, widths: tuple[float, ...], max_batch: int
) -> CompletionModel:
    """The front's predicted completion times: each server's device spec on the served model's
    segment costs (as the live experiments predict), batches of at most ``max_batch``."""
    costs = compute_cost_table(len(spec.class_names), spec.image_size, widths)
    return device_completion_model(specs, costs, widths, max_batch)


class ServingRuntime:
    """Ray session + server actors + router + front, for one config.

    Args:
        config: The serving config.
        address: A running Ray cluster (``ray start --head`` prints it), or None for a local
            session; ignored when the process is already connected to Ray (tests).
        num_cpus: CPUs of a local session (None: all of this machine's).
    """

    def __init__(
        self, config: ServeConfig, address: str | None = None, num_cpus: int | None = None
    ) -> None:
        self.config = config
        self.address = address
        self.num_cpus = num_cpus
        self.metrics = ServingMetrics()
        self.front: Front | None = None
        self.pool: RayServerPool | LocalServerPool | None = None
        self.input_spec: InputSpec | None = None
        self.event_loop: asyncio.AbstractEventLoop | None = None
        """The loop the front runs on (to call into the runtime from another thread)."""
        self._owns_ray = False

    async def start(self) -> None:
        """Starts the servers (waits for their models; joins Ray first for the ``ray`` pool) and
        the routing loop.

        Raises:
            DataError: For an unreadable model checkpoint.
            ConfigError: For bad executor knobs or a router that does not fit the servers.
            ServerStartError: If a server actor cannot start.
        """
        try:
            await self._bring_up()
        except BaseException:
            await self.stop()  # a failed start leaves no actor, thread or Ray session behind
            raise

    async def _bring_up(self) -> None:
        self.event_loop = asyncio.get_running_loop()
        config = self.config
        checkpoint = load_checkpoint(config.checkpoint)
        self.input_spec = input_spec(checkpoint)
        executor = {"widths": config.widths, **config.executor}
        # Fail here, not in every actor.
        max_batch = validate_config(executor, ExecutorConfig, "executor").max_batch
        pool: RayServerPool | LocalServerPool
        if config.pool == "local":
            servers = config.servers or default_servers(torch.cuda.device_count())
            router = build_router(config, len(servers))
            pool = LocalServerPool(servers, checkpoint, executor, config.telemetry_interval_s)
        else:
            self._join_ray()
            servers = config.servers or default_servers(int(ray.cluster_resources().get("GPU", 0)))
            router = build_router(config, len(servers))
            problem = unplaceable(servers, ray.cluster_resources())
            if problem is not None:
                raise ConfigError(problem)
            pool = RayServerPool(servers, checkpoint, executor, config.telemetry_interval_s)
        self.pool = pool
        await pool.start()
        self.metrics.watch_servers(pool.snapshots)
        self.front = Front(
            pool,
            router,
            AdmissionController(
                config.admission.max_images_in_system, config.admission.deadline_headroom
            ),
            WallClock(),
            self.metrics,
            widths=config.widths,
            group_sizes=config.group_sizes,
            max_attempts=config.admission.max_attempts,
            shed_from=config.admission.shed_from,
            completion=front_completion(pool.specs, self.input_spec, config.widths, max_batch),
        )
        self.front.start()
        frozen = freeze_startup_objects()  # full collections under load walk only new objects
        names = ", ".join(f"{server.name} ({server.device})" for server in servers)
        LOG.info(
            "servers up: %s; router %s; %d start-up objects frozen", names, config.router, frozen
        )

    def _join_ray(self) -> None:
        """Connects to the configured Ray cluster, or starts a local session (unless connected)."""
        if ray.is_initialized():
            return
        local = self.address is None
        ray.init(
            address=self.address,
            num_cpus=self.num_cpus if local else None,
            include_dashboard=False,
            log_to_driver=False,
            # Ray starts workers at niceness 15: on a busy CPU host the servers would then
            # lose every contest for a core to the HTTP front, whose refusals multiply
            # under overload, and goodput collapses. Same priority as the front instead.
            _system_config={"worker_niceness": 0} if local else None,
        )
        self._owns_ray = True

    async def stop(self) -> None:
        """Answers what is queued (503), ends the actors, and the Ray session if it started it."""
        if self.front is not None:
            await self.front.stop()
        if self.pool is not None:
            await self.pool.stop()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
        thaw_startup_objects()
