"""Slim serving rebuilt on Ray Serve, and Ray Serve's own ``@serve.batch`` baseline: the
alternatives ``bench_serving_stacks.py`` measures against ``hetsched slim serve``.

* **slim-on-serve**: an ingress deployment runs the same FastAPI app, front, router and admission
  as ``hetsched slim serve`` (:func:`hetsched.slim.serving.app.create_app`); the servers are one
  deployment each (one replica holding a greedy executor), and the front dispatches every block
  to the server its router chose through that server's handle (pinned dispatch). Serve adds its
  HTTP proxy in front of the ingress, ``max_ongoing_requests`` back-pressure per replica, health
  checks (``check_health`` fails once the executor loop died) and replica restarts. Activations
  come back to the ingress with each answer (a handle's answer is one object, not one per item).
* **serve-batch**: the usual Ray Serve way to serve one model: replicas of a deployment that
  batches single images with ``@serve.batch`` and runs the full-width model, no Slim routing.

Run one of them in this process until Ctrl-C: ``python benchmarks/serving_rayserve.py
--stack slim-on-serve --checkpoint CKPT --port 8790``.
"""

# No ``from __future__ import annotations``: FastAPI reads the route methods' annotations after
# Ray has shipped the classes by value, where string annotations no longer resolve.
import argparse
import asyncio
import logging
import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import ray
import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from ray import serve
from ray.exceptions import RayActorError
from ray.serve import Deployment
from ray.serve.handle import DeploymentHandle

from hetsched.core.devices import DeviceSpec
from hetsched.core.events import WallClock
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.blocks import BlockItem, ItemResult, ServerFailedError
from hetsched.slim.serving.config import ServeConfig
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import decode_image_file
from hetsched.slim.serving.metrics import ServerSnapshot, ServingMetrics
from hetsched.slim.serving.polled_pool import PolledServerPool
from hetsched.slim.serving.runtime import build_router, front_completion, input_spec
from hetsched.slim.serving.worker import worker_from_checkpoint

LOG = logging.getLogger(__name__)


def server_names(count: int) -> tuple[str, ...]:
    """The servers' names, as ``hetsched slim serve`` names its default CPU servers."""
    return tuple(f"cpu{i}" for i in range(count))


@serve.deployment(
    max_ongoing_requests=256,
    health_check_period_s=1.0,
    health_check_timeout_s=10.0,
    ray_actor_options={"num_cpus": 1},
)
class SegmentServer:
    """One Slim server: a greedy executor on the live backend, as a Serve replica."""

    def __init__(self, name: str, checkpoint: dict[str, Any], executor: dict[str, Any]) -> None:
        self.worker = worker_from_checkpoint(name, checkpoint, "cpu", executor)

    async def run_block(
        self, width: float, segments: list[int], prev_widths: list[float], inputs: list[Any]
    ) -> list[tuple[float, np.ndarray, float, float]]:
        results = await self.worker.run_block(
            width, list(zip(segments, prev_widths, inputs, strict=True))
        )
        return [(r.executed_width, r.output, r.queue_s, r.compute_s) for r in results]

    async def snapshot(self) -> ServerSnapshot:
        return await self.worker.snapshot()

    def device_spec(self) -> dict[str, Any]:
        """The device spec this server's power model and the front's predictions use."""
        return self.worker.backend.spec.model_dump(mode="json")

    def pid(self) -> int:
        return os.getpid()

    def check_health(self) -> None:
        """Serve restarts the replica when this raises (the executor loop crashed)."""
        self.worker.check_alive()


class HandlePool(PolledServerPool):
    """The front's server pool over one deployment handle per server (pinned dispatch)."""

    DOWN_ERRORS = (RayActorError,)

    def __init__(self, handles: Sequence[DeploymentHandle], telemetry_interval_s: float) -> None:
        super().__init__(server_names(len(handles)), telemetry_interval_s)
        self.handles = list(handles)

    async def start(self) -> None:
        """Reads every server's device spec (the front's predictions), then polls telemetry."""
        for index, handle in enumerate(self.handles):
            self.specs.append(DeviceSpec.model_validate(await handle.device_spec.remote()))
            self._up[index] = True
        self._start_polling()

    async def stop(self) -> None:
        await self._stop_polling()

    async def _read_snapshot(self, index: int) -> ServerSnapshot:
        return await self.handles[index].snapshot.remote()

    async def run_block(
        self, index: int, width: float, items: Sequence[BlockItem]
    ) -> list[ItemResult]:
        call = self.handles[index].run_block.remote(
            width,
            [item.segment for item in items],
            [item.prev_width for item in items],
            [item.payload for item in items],
        )
        try:
            outputs = await call
        except RayActorError as error:
            self._up[index] = False
            raise ServerFailedError(f"{self.names[index]}: {error}") from None
        return [ItemResult(w, out, q, c) for w, out, q, c in outputs]

    async def fetch(self, payload: Any) -> np.ndarray:
        return payload  # the activation came back with the answer


class SlimOnServeRuntime:
    """The front over a :class:`HandlePool`: the :class:`~hetsched.slim.serving.service.Service`
    the ingress deployment's app serves."""

    def __init__(self, config: ServeConfig, handles: Sequence[DeploymentHandle]) -> None:
        self.config = config
        self.metrics = ServingMetrics()
        self.front: Front | None = None
        self.input_spec = input_spec(load_checkpoint(config.checkpoint))
        self.pool = HandlePool(handles, config.telemetry_interval_s)
        self.metrics.watch_servers(self.pool.snapshots)

    async def start(self) -> None:
        config, admission = self.config, self.config.admission
        await self.pool.start()
        max_batch = ExecutorConfig.model_validate(config.executor).max_batch
        self.front = Front(
            self.pool,
            build_router(config, len(self.pool.names)),
            AdmissionController(admission.max_images_in_system, admission.deadline_headroom),
            WallClock(),
            self.metrics,
            widths=self.config.widths,
            group_sizes=self.config.group_sizes,
            max_attempts=admission.max_attempts,
            shed_from=admission.shed_from,
            completion=front_completion(self.pool.specs, self.input_spec, config.widths, max_batch),
        )
        self.front.start()

    async def stop(self) -> None:
        if self.front is not None:
            await self.front.stop()
        await self.pool.stop()


@serve.deployment(max_ongoing_requests=1024, ray_actor_options={"num_cpus": 0})
@serve.ingress()
class SlimIngress:
    """The HTTP entry: the project's app (front, router, admission, OIP) over the handles."""

    def __init__(self, config: dict[str, Any], *servers: DeploymentHandle) -> None:
        self.runtime = SlimOnServeRuntime(ServeConfig.model_validate(config), servers)

    def __serve_build_asgi_app__(self) -> FastAPI:
        return create_app(self.runtime)


BASELINE_APP = FastAPI()


@serve.deployment(max_ongoing_requests=256, ray_actor_options={"num_cpus": 1})
@serve.ingress(BASELINE_APP)
class BatchedClassifier:
    """Ray Serve's usual recipe: full-width model, single images batched by ``@serve.batch``;
    ``POST /v1/classify`` takes PNG files like the project's API and answers their labels."""

    def __init__(self, checkpoint: dict[str, Any]) -> None:
        torch.set_num_threads(1)
        self.model = model_from_checkpoint(checkpoint).eval()
        self.spec = input_spec(checkpoint)

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.002)
    async def classify(self, images: list[np.ndarray]) -> list[int]:
        with torch.inference_mode():
            logits = self.model(torch.from_numpy(np.stack(images)), (1.0,) * 4)
        return [int(label) for label in logits.argmax(dim=1)]

    @BASELINE_APP.post("/v1/classify")
    async def classify_request(self, request: Request) -> JSONResponse:
        form = await request.form()
        files = [await upload.read() for upload in form.getlist("image")]  # type: ignore[union-attr]
        images = [
            decode_image_file(data, "image/png", self.spec, index=i, max_pixels=1 << 20)
            for i, data in enumerate(files)
        ]
        labels = await asyncio.gather(*(self.classify(image) for image in images))
        return JSONResponse({"results": [{"label": label} for label in labels]})

    @BASELINE_APP.get("/readyz")
    async def readyz(self) -> dict[str, str]:
        return {"status": "ready"}

    @BASELINE_APP.get("/metrics")
    async def metrics(self) -> PlainTextResponse:
        return PlainTextResponse("")


def build(stack: str, checkpoint_path: Path, servers: int) -> Any:
    """The Serve application of ``stack`` (``servers`` servers or replicas, one CPU each).

    ``@serve.deployment`` turns each class into a :class:`Deployment`, which type checkers do not
    see through: hence the casts."""
    checkpoint = load_checkpoint(checkpoint_path)
    if stack == "serve-batch":
        return cast(Deployment, BatchedClassifier).options(num_replicas=servers).bind(checkpoint)
    executor: dict[str, Any] = {}  # the executor's defaults, as in hetsched slim serve
    deployments = [
        cast(Deployment, SegmentServer)
        .options(name=f"server-{name}")
        .bind(name, checkpoint, executor)
        for name in server_names(servers)
    ]
    config = {"checkpoint": str(checkpoint_path.resolve()), "executor": executor}
    return cast(Deployment, SlimIngress).bind(config, *deployments)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=("slim-on-serve", "serve-batch"), required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--servers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=args.servers,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"worker_niceness": 0},  # as hetsched slim serve does
    )
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(build(args.stack, args.checkpoint, args.servers), name="slim", route_prefix="/")
    print(f"{args.stack} serving on http://127.0.0.1:{args.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
