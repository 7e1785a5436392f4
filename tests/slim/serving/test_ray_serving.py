"""End to end on a real Ray session: a 2-server CPU cluster behind the HTTP API.

One Ray session and one server for the whole module (Ray takes seconds and ~1 GB to start).
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from hetsched.slim.model.checkpoint import load_model
from hetsched.slim.model.data import load_digits
from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.config import AdmissionConfig, ServeConfig, ServerConfig
from hetsched.slim.serving.http_server import BackgroundServer
from hetsched.slim.serving.loadgen import holdout_pngs
from hetsched.slim.serving.polled_pool import ServerStartError
from hetsched.slim.serving.runtime import ServingRuntime

ray = pytest.importorskip("ray")
triton = pytest.importorskip("tritonclient.http")
triton_utils = pytest.importorskip("tritonclient.utils")

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(ray_session, digits_checkpoint: Path):
    config = ServeConfig(
        checkpoint=digits_checkpoint,
        servers=(
            ServerConfig(name="cpu0"),
            ServerConfig(
                name="cpu1", nice=5, onednn_cache_capacity=None, torch_lru_cache_capacity=8
            ),
        ),
        router="static-widest",  # widest width on the least-loaded server: both servers work
        executor={"max_batch": 8, "idle_unload_s": 0.5},
        admission=AdmissionConfig(max_images_in_system=512, max_image_bytes=20_000),
        token=TOKEN,
        telemetry_interval_s=0.1,
    )
    runtime = ServingRuntime(config)
    background = BackgroundServer(create_app(runtime))
    url = background.start()
    yield url, runtime
    background.stop()


@pytest.fixture(scope="module")
def digits():
    dataset = load_digits(8)
    return dataset.test_images.numpy(), dataset.test_labels.numpy()


def as_b64(image: np.ndarray) -> dict:
    return {"b64": base64.b64encode(image.tobytes()).decode(), "shape": list(image.shape)}


def reference_labels(checkpoint: Path, images: np.ndarray, widths: list[list[float]]) -> list:
    """What the model predicts in-process at the widths each image was served with."""
    model = load_model(checkpoint)
    with torch.inference_mode():
        return [
            int(model(torch.from_numpy(x).unsqueeze(0), tuple(w)).argmax())
            for x, w in zip(images, widths, strict=True)
        ]


async def post_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120) as client:
        return await asyncio.gather(*(client.post("/v1/classify", json=b) for b in bodies))


def test_serves_digits_test_images_with_the_right_labels(server, digits, digits_checkpoint):
    url, _ = server
    images, labels = digits[0][:48], digits[1][:48]
    bodies = [
        {"images": [as_b64(x) if i % 2 else x.tolist() for i, x in enumerate(images[k : k + 8])]}
        for k in range(0, 48, 8)
    ]
    responses = asyncio.run(post_all(url, bodies))
    assert [r.status_code for r in responses] == [200] * 6
    results = [item for r in responses for item in r.json()["results"]]
    assert len(results) == 48
    served = [r["label"] for r in results]
    widths = [r["widths"] for r in results]
    assert all(len(w) == 4 for w in widths)
    assert served == reference_labels(digits_checkpoint, images, widths)
    assert np.mean(np.asarray(served) == labels) > 0.5  # chance is 0.1
    assert {s for r in results for s in r["servers"]} == {"cpu0", "cpu1"}
    first = results[0]
    assert len(first["top_k"]) == 5 and first["top_k"][0]["label"] == first["label"]
    assert first["latency_s"] > 0 and first["compute_s"] > 0


def test_png_uploads_are_served(server, digits):
    url, _ = server
    files, labels = holdout_pngs("digits:8", 16)
    response = httpx.post(
        f"{url}/v1/classify",
        files=[("image", (f"{i}.png", f, "image/png")) for i, f in enumerate(files)],
        data={"top_k": "2"},
        headers=AUTH,
        timeout=60,
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 16 and all(len(r["top_k"]) == 2 for r in results)
    assert np.mean([r["label"] == label for r, label in zip(results, labels, strict=True)]) > 0.5


def test_malformed_requests_get_a_clear_4xx_and_serving_goes_on(server, digits):
    url, _ = server
    good = {"images": [digits[0][0].tolist()]}
    cases = [
        (dict(content="hello", headers={"Content-Type": "text/plain"}), 415, "text/plain"),
        (dict(json={"images": [{"b64": "%%%", "shape": [3, 8, 8]}]}), 400, "invalid base64"),
        (dict(json={"images": [np.zeros((3, 32, 32)).tolist()]}), 422, "model takes (3, 8, 8)"),
        (dict(json={"images": [as_b64(np.zeros((3, 90, 90), np.float32))]}), 413, "more than"),
        (dict(content=b"{not json", headers={"Content-Type": "application/json"}), 400, "JSON"),
        (dict(json={"pictures": []}), 400, "'images'"),
        (dict(files=[("image", ("x.png", b"GIF89a....", "image/png"))]), 400, "PNG"),
        (dict(files=[("image", ("x.png", b"0" * 30_000, "image/png"))]), 413, "bytes"),
        (dict(json={**good, "deadline_s": "soon"}), 400, "deadline_s"),
    ]
    for kwargs, status, words in cases:
        response = httpx.post(
            f"{url}/v1/classify", headers=AUTH | kwargs.pop("headers", {}), **kwargs
        )
        assert response.status_code == status, (kwargs, response.text)
        assert words in response.json()["error"], response.text
    assert httpx.post(f"{url}/v1/classify", json=good, headers=AUTH).status_code == 200


def test_token_protects_the_api_but_not_the_probes(server, digits):
    url, _ = server
    good = {"images": [digits[0][0].tolist()]}
    assert httpx.post(f"{url}/v1/classify", json=good).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{url}/v1/classify", json=good, headers=wrong).status_code == 401
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{url}/readyz").json() == {"status": "ready", "servers_up": 2}
    metrics = httpx.get(f"{url}/metrics", headers=AUTH).text
    for name in (
        "hetsched_slim_request_seconds_bucket",
        "hetsched_slim_queue_seconds_bucket",
        "hetsched_slim_compute_seconds_bucket",
        'hetsched_slim_server_utilization_percent{server="cpu0"}',
        "hetsched_slim_server_vram_used_bytes",
        'hetsched_slim_server_energy_joules_total{server="cpu1",source="',
        "hetsched_slim_server_instance_loads_total",
        'hetsched_slim_http_requests_total{route="/v1/classify",status="401"}',
    ):
        assert name in metrics


def test_overload_is_refused_early_with_429_and_a_reason(server, digits):
    url, runtime = server
    admission = runtime.front.admission
    limit = admission.max_images_in_system
    admission.max_images_in_system = 16
    try:
        bodies = [{"images": [x.tolist() for x in digits[0][:8]]} for _ in range(12)]
        responses = asyncio.run(post_all(url, bodies))
        # An unmeetable deadline is refused before any work is queued.
        late = httpx.post(
            f"{url}/v1/classify", json={**bodies[0], "deadline_s": 1e-6}, headers=AUTH
        )
    finally:
        admission.max_images_in_system = limit
    statuses = sorted(r.status_code for r in responses)
    assert 200 in statuses and 429 in statuses and set(statuses) <= {200, 429}
    rejected = next(r for r in responses if r.status_code == 429)
    assert rejected.json()["reason"] == "queue_full" and rejected.headers["Retry-After"]
    assert "exceed the limit of 16" in rejected.json()["error"]
    # 1 us is below the fastest image ever answered: no load would let it through.
    assert late.status_code == 422 and late.json()["reason"] == "deadline_too_short"
    assert admission.images_in_system == 0


def test_killed_server_loses_nothing_and_rejoins(server, digits, digits_checkpoint):
    url, runtime = server
    front, pool = runtime.front, runtime.pool
    images = digits[0][:64]
    bodies = [{"images": [x.tolist() for x in images[k : k + 4]]} for k in range(0, 64, 4)]
    served_before = front.completed
    pid = asyncio.run_coroutine_threadsafe(pool.pid(0), runtime.event_loop).result(30)

    async def load_and_kill():
        requests = asyncio.ensure_future(post_all(url, bodies))
        deadline_s = time.monotonic() + 60
        while front.in_flight[0] == 0 and time.monotonic() < deadline_s:
            await asyncio.sleep(0.005)
        assert front.in_flight[0] > 0, "cpu0 never got work"
        os.kill(pid, signal.SIGKILL)  # a crash, not a clean exit: Ray restarts the actor
        return await requests

    responses = asyncio.run(load_and_kill())
    assert [r.status_code for r in responses] == [200] * len(bodies), [r.text for r in responses]
    results = [item for r in responses for item in r.json()["results"]]
    assert len(results) == 64  # every image answered, once, in its request
    assert [r["label"] for r in results] == reference_labels(
        digits_checkpoint, images, [r["widths"] for r in results]
    )
    assert sum(r["reroutes"] for r in results) > 0
    assert front.completed - served_before == 64 and front.admission.images_in_system == 0
    assert front.metrics.rerouted.labels("server_failed")._value.get() > 0

    deadline_s = time.monotonic() + 90
    while not pool.is_up(0) and time.monotonic() < deadline_s:
        time.sleep(0.2)
    assert pool.is_up(0), "the restarted server did not rejoin"
    after = asyncio.run(post_all(url, bodies[:8]))
    servers = {s for r in after for item in r.json()["results"] for s in item["servers"]}
    assert "cpu0" in servers


def test_a_failed_start_names_the_server_and_leaves_no_actor_behind(ray_session, digits_checkpoint):
    # No CPU reserved: both actors are placed beside the module's server.
    servers = (
        ServerConfig(name="good", num_cpus=0),
        ServerConfig(name="bad", num_cpus=0, spec="x"),
    )
    runtime = ServingRuntime(ServeConfig(checkpoint=digits_checkpoint, servers=servers))
    with pytest.raises(ServerStartError, match=r"server 'bad' did not start.*unknown device 'x'"):
        asyncio.run(runtime.start())
    assert runtime.pool is not None
    deadline_s = time.monotonic() + 20  # ray.kill is asynchronous
    with pytest.raises(ray.exceptions.RayActorError):  # the good server was ended, not leaked
        while time.monotonic() < deadline_s:
            asyncio.run(runtime.pool.pid(0))
            time.sleep(0.2)


def test_a_server_asked_to_be_nicer_runs_at_lower_cpu_priority(server):
    _, runtime = server
    pool = runtime.pool
    pids = [
        asyncio.run_coroutine_threadsafe(pool.pid(index), runtime.event_loop).result(30)
        for index in (0, 1)
    ]
    niceness = [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids]
    assert niceness[1] == min(19, niceness[0] + 5)


def test_the_convolution_cache_caps_are_in_the_actors_environment(server):
    _, runtime = server
    pool = runtime.pool
    caps = []
    for index in (0, 1):
        pid = asyncio.run_coroutine_threadsafe(pool.pid(index), runtime.event_loop).result(30)
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        caps.append(sorted(v for v in environ if v.startswith((b"ONEDNN_PRIMITIVE", b"LRU_CACHE"))))
    # The defaults; then oneDNN's own default (None, nothing set) and a cap of 8.
    assert caps[0] == [b"LRU_CACHE_CAPACITY=64", b"ONEDNN_PRIMITIVE_CACHE_CAPACITY=256"]
    assert caps[1] == [b"LRU_CACHE_CAPACITY=8"]


def test_a_standard_oip_client_gets_the_models_top1(server, digits, digits_checkpoint):
    url, _ = server
    # headers copied per call: the client writes its Inference-Header-Content-Length into them
    client = triton.InferenceServerClient(url.removeprefix("http://"))
    assert client.is_server_live(headers=dict(AUTH)) and client.is_server_ready(headers=dict(AUTH))
    assert client.is_model_ready("slimresnet", headers=dict(AUTH))
    metadata = client.get_model_metadata("slimresnet", headers=dict(AUTH))
    assert metadata["inputs"][0]["shape"] == [-1, 3, 8, 8]
    images = digits[0][:12].astype(np.float32)
    tensor = triton.InferInput("input", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images)  # the binary data extension, as the client defaults to
    result = client.infer(
        "slimresnet", [tensor], headers=dict(AUTH), parameters={"deadline_s": 30, "min_width": 0.5}
    )
    labels, widths = result.as_numpy("label"), result.as_numpy("widths")
    assert widths.shape == (12, 4) and widths.min() >= 0.5
    assert labels.tolist() == reference_labels(digits_checkpoint, images, widths.tolist())
    probabilities = result.as_numpy("probabilities")
    assert probabilities.shape == (12, 10) and np.allclose(probabilities.sum(axis=1), 1)
    pixels = np.zeros((1, 3, 8, 8), np.uint8)
    raw = triton.InferInput("input", [1, 3, 8, 8], "UINT8")
    raw.set_data_from_numpy(pixels, binary_data=False)  # JSON data
    wanted = [triton.InferRequestedOutput("label", binary_data=False)]
    answer = client.infer("slimresnet", [raw], outputs=wanted, headers=dict(AUTH))
    assert answer.as_numpy("label").shape == (1,) and answer.as_numpy("widths") is None
    with pytest.raises(triton_utils.InferenceServerException, match="not served"):
        client.infer("other-model", [tensor], headers=dict(AUTH))
