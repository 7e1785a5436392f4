"""The one-host pool: servers as threads of the front's process, no Ray.

What it must keep from the Ray pool: the same answers as the in-process model, both servers
used, a crashed server's images re-routed (none lost) and the server back in the routing.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.slim.model.checkpoint import load_checkpoint, load_model
from hetsched.slim.model.data import load_digits
from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.blocks import BlockItem, ServerFailedError
from hetsched.slim.serving.config import ServeConfig, ServerConfig
from hetsched.slim.serving.http_server import BackgroundServer
from hetsched.slim.serving.local_pool import LocalServerPool
from hetsched.slim.serving.runtime import ServingRuntime

ray = pytest.importorskip("ray")  # the runtime module imports it (the serve extra)


@pytest.fixture(scope="module")
def digits():
    dataset = load_digits(8)
    return dataset.test_images.numpy()[:40], dataset.test_labels.numpy()[:40]


def test_the_local_pool_serves_the_models_answers_without_ray(digits, digits_checkpoint: Path):
    config = ServeConfig(
        checkpoint=digits_checkpoint,
        servers=(ServerConfig(name="cpu0"), ServerConfig(name="cpu1")),
        pool="local",
        router="static-widest",  # full width (accuracy is the model's) on the least-loaded server
        executor={"max_batch": 8},
    )
    ray_before = ray.is_initialized()  # another module's session may be open; ours must not be
    runtime = ServingRuntime(config)
    background = BackgroundServer(create_app(runtime))
    url = background.start()
    images, labels = digits
    try:

        async def post_all() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                bodies = [
                    {"images": [x.tolist() for x in images[k : k + 4]]} for k in range(0, 40, 4)
                ]
                return await asyncio.gather(*(client.post("/v1/classify", json=b) for b in bodies))

        responses = asyncio.run(post_all())
        assert [r.status_code for r in responses] == [200] * 10, [r.text for r in responses]
        results = [item for r in responses for item in r.json()["results"]]
        metrics = httpx.get(f"{url}/metrics").text
        ray_during = ray.is_initialized()
    finally:
        background.stop()
    assert isinstance(runtime.pool, LocalServerPool)
    assert ray_during == ray_before, "the local pool must not start Ray"
    model = load_model(digits_checkpoint)
    with torch.inference_mode():
        expected = [
            int(model(torch.from_numpy(x).unsqueeze(0), tuple(r["widths"])).argmax())
            for x, r in zip(images, results, strict=True)
        ]
    assert [r["label"] for r in results] == expected
    assert np.mean(np.asarray(expected) == labels) > 0.5
    assert {s for r in results for s in r["servers"]} == {"cpu0", "cpu1"}
    assert 'hetsched_slim_server_up{server="cpu0"} 1.0' in metrics


def test_a_crashed_server_fails_its_blocks_and_is_rebuilt(digits_checkpoint: Path):
    checkpoint = load_checkpoint(digits_checkpoint)
    pool = LocalServerPool(
        [ServerConfig(name="cpu0"), ServerConfig(name="cpu1")],
        checkpoint,
        {"idle_unload_s": 600.0},
        telemetry_interval_s=0.05,
    )
    image = np.zeros((3, 8, 8), np.float32)

    def crash() -> None:
        raise ValueError("a batch failed")

    async def scenario() -> tuple[list, bool, bool, list]:
        await pool.start()
        try:
            (before,) = await pool.run_block(0, 1.0, [BlockItem(0, 1.0, image)])
            worker = pool._workers[0]
            assert worker is not None
            block = asyncio.ensure_future(pool.run_block(0, 1.0, [BlockItem(0, 1.0, image)]))
            worker.loop.call_soon_threadsafe(crash)  # the loop dies with the block in it
            with pytest.raises(ServerFailedError, match="cpu0"):
                await asyncio.wait_for(block, 30)
            went_down = not pool.is_up(0)
            deadline_s = time.monotonic() + 60
            while not pool.is_up(0) and time.monotonic() < deadline_s:
                await asyncio.sleep(0.05)
            (after,) = await pool.run_block(0, 1.0, [BlockItem(0, 1.0, image)])
            return [before.output, after.output], went_down, pool.is_up(1), pool.snapshots()
        finally:
            await pool.stop()

    outputs, went_down, other_up, snapshots = asyncio.run(scenario())
    assert went_down, "the crashed server stayed in the routing"
    assert other_up, "a crash of one server took the other down"
    np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5)  # rebuilt from the weights
    assert all(s.up for s in snapshots)


@pytest.mark.parametrize(
    ("servers", "threads", "slots"),
    [
        ([ServerConfig(name="cpu0")], 1, [1]),
        ([ServerConfig(name="cpu0", num_cpus=2)], 1, [2]),
        ([ServerConfig(name="cpu0", num_cpus=2, torch_threads=2)], 2, [1]),
        ([ServerConfig(name="a", num_cpus=4, torch_threads=2), ServerConfig(name="b")], 2, [2, 1]),
    ],
)
def test_a_local_server_computes_num_cpus_over_torch_threads_batches_at_once(
    digits_checkpoint: Path, servers, threads, slots
):
    """One process, one torch thread pool: the largest ``torch_threads`` applies to every server,
    and each server's executor forms batches for ``num_cpus // torch_threads`` slots (never more
    than this machine's cores hold: ``cpu_compute_slots``)."""
    threads_before = torch.get_num_threads()
    pool = LocalServerPool(servers, load_checkpoint(digits_checkpoint), {})

    async def build() -> tuple[int, list[int | None]]:
        await pool.start()
        try:
            workers = [worker for worker in pool._workers if worker is not None]
            # what a batch computes with: read on the thread that runs the server's batches
            in_batch = workers[0].backend._pool.submit(torch.get_num_threads).result()
            return in_batch, [w.backend.batch_slots for w in workers]
        finally:
            await pool.stop()

    cores = len(os.sched_getaffinity(0))
    try:
        assert asyncio.run(build()) == (threads, [min(s, max(1, cores // threads)) for s in slots])
    finally:
        torch.set_num_threads(threads_before)


@pytest.mark.parametrize(
    ("server", "threads", "slots"),
    [
        (ServerConfig(name="a"), 1, 1),
        (ServerConfig(name="a", num_cpus=4), 2, 2),
        (ServerConfig(name="a", num_cpus=3), 2, 1),
        (ServerConfig(name="a", num_cpus=0.5), 1, 1),
        (ServerConfig(name="a", num_cpus=8, device="cuda"), 1, None),
    ],
)
def test_a_servers_compute_slots_are_its_cpus_over_its_threads(server, threads, slots):
    """What both pools give a server's executor (Ray actors and local threads alike); a GPU
    server keeps the backend's stream workers."""
    assert server.compute_slots(threads) == slots


def test_serve_refuses_an_unknown_pool(tmp_path: Path):
    config = tmp_path / "cluster.yaml"
    config.write_text("checkpoint: x.pt\npool: threads\n")
    result = CliRunner().invoke(typer_app, ["slim", "serve", "--config", str(config)])
    assert "pool" in str(result.exception) and "'ray' or 'local'" in str(result.exception)
    result = CliRunner().invoke(
        typer_app, ["slim", "serve", "--config", str(config), "--pool", "gpu"]
    )
    assert "--pool: expected ray or local" in str(result.exception)


def test_serve_refuses_ray_options_with_the_local_pool(tmp_path: Path):
    config = tmp_path / "cluster.yaml"
    config.write_text("checkpoint: x.pt\npool: local\n")
    for option in (["--address", "10.0.0.1:6379"], ["--num-cpus", "2"]):
        result = CliRunner().invoke(typer_app, ["slim", "serve", "--config", str(config), *option])
        assert "without Ray" in str(result.exception), result.output
