"""The HTTP layer over a fake serving system (no Ray): hardening, early refusals, the error body."""

from __future__ import annotations

import base64
import io
import json
import socket
import struct
import time
import zlib
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.config import AdmissionConfig, HttpConfig, ServeConfig
from hetsched.slim.serving.http_server import BackgroundServer
from tests.slim.serving.fakes import SPEC, FakePool, FakeService, array_label

TOKEN = "app-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HTTP = HttpConfig(header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=5)


def serve(pool: FakePool | None = None, **admission) -> tuple[BackgroundServer, FakeService]:
    config = ServeConfig(
        checkpoint=Path("unused.pt"),
        admission=AdmissionConfig(max_image_bytes=20_000, max_body_bytes=200_000, **admission),
        token=TOKEN,
        http=HTTP,
    )
    service = FakeService(config, pool)
    server = BackgroundServer(create_app(service), HTTP)
    server.start()
    return server, service


@pytest.fixture(scope="module")
def server():
    background, service = serve()
    yield background.url, service
    background.stop()


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server[0], headers=AUTH, timeout=10) as http:
        yield http


def image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=SPEC.shape).astype(np.float32)


def b64(array: np.ndarray, **fields) -> dict:
    return {"b64": base64.b64encode(array.tobytes()).decode(), "shape": list(array.shape), **fields}


def png(size: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (size, size)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_classify_answers_each_image(client):
    images = [image(i) for i in range(3)]
    response = client.post("/v1/classify", json={"images": [x.tolist() for x in images]})
    assert response.status_code == 200, response.text
    assert [r["label"] for r in response.json()["results"]] == [array_label(x) for x in images]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"images": [image().tolist()], "top_k": "Infinity"}, "top_k"),
        ({"images": [image().tolist()], "deadline_s": True}, "deadline_s"),
        ({"images": [image().tolist()], "width": -1}, "Extra inputs are not permitted"),
        ({"images": [b64(image(), dtype=["float32"])]}, "dtype"),
        ({"images": [b64(image(), dtype={"a": 1})]}, "dtype"),
        ({"images": [{"b64": "AAAA", "shape": [4294967296, 4294967296]}]}, "more than"),
        ({"images": [b64(image(), extra=1)]}, "unknown field"),
        ({"images": [image().tolist()], "min_width": 1.5}, "min_width"),
    ],
)
def test_fuzz_found_bodies_get_a_4xx_with_a_reason(client, body, words):
    response = client.post("/v1/classify", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert words in response.json()["error"] and response.json()["reason"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"images": [], "top_k": Infinity}',
        b'{"images": [[[NaN]]]}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"images": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_non_standard_or_deep_json_is_400(client, raw):
    response = client.post(
        "/v1/classify", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 413), response.text
    assert response.json()["reason"]


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` pixels in a few dozen bytes (a bomb's head)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def test_decompression_bomb_png_is_413(client):
    bomb = png_header(20_000, 20_000)  # 400 M pixels declared
    response = client.post("/v1/classify", files=[("image", ("b.png", bomb, "image/png"))])
    assert response.status_code == 413 and response.json()["reason"] == "image_too_large"


def test_form_options_and_unknown_form_fields(client):
    files = [("image", ("a.png", png(8), "image/png"))]
    ok = client.post("/v1/classify", files=files, data={"top_k": "2", "deadline_s": "5"})
    assert ok.status_code == 200 and len(ok.json()["results"][0]["top_k"]) == 2
    bad = client.post("/v1/classify", files=files, data={"deadline_s": "inf"})
    assert bad.status_code == 400 and "finite" in bad.json()["error"]
    unknown = client.post("/v1/classify", files=files, data={"width": "-1"})
    assert unknown.status_code == 400 and "'width'" in unknown.json()["error"]


@pytest.mark.parametrize(
    ("files", "data", "status", "reason", "words"),
    [
        ([("image", ("a.png", b"x" * 20_001, "image/png"))], {}, 413, "image_too_large", "20001"),
        ([("image", ("a.png", png(8), "image/png"))] * 65, {}, 413, "too_many_images", "64"),
        ([("photo", ("a.png", png(8), "image/png"))], {}, 400, "bad_multipart", "'photo'"),
        ([("image", ("a.png", png(8), "image/png"))], {"image": "x"}, 400, "bad_multipart", "text"),
        ([("image", ("a.gif", png(8), "image/gif"))], {}, 415, "unsupported_image_type", "gif"),
        ([("image", ("a.png", b"not a png", "image/png"))], {}, 400, "bad_image", "image 0"),
    ],
)
def test_multipart_parts_beyond_the_limits_or_names_are_refused(
    client, files, data, status, reason, words
):
    response = client.post("/v1/classify", files=files, data=data)
    assert response.status_code == status, response.text
    assert response.json()["reason"] == reason and words in response.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        b"--b\r\nContent-Disposition: form-data; name=image; filename=a.png\r\n\r\nabc",
        b"no boundary anywhere",
        b"--b\r\n" + b"X-Header: y\r\n" * 50 + b"\r\nabc\r\n--b--\r\n",
    ],
)
def test_malformed_multipart_framing_is_400(client, body):
    headers = {"Content-Type": "multipart/form-data; boundary=b"}
    response = client.post("/v1/classify", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["reason"] in ("bad_multipart", "no_images")


def test_a_multipart_content_type_without_a_boundary_is_400(client):
    headers = {"Content-Type": "multipart/form-data"}
    response = client.post("/v1/classify", content=b"--b--", headers=headers)
    assert response.status_code == 400 and response.json()["reason"] == "bad_multipart"


def test_unknown_paths_and_methods_use_the_error_body(client):
    missing = client.get("/nope")
    assert missing.status_code == 404 and missing.json()["reason"] == "not_found"
    wrong = client.get("/v1/classify")
    assert wrong.status_code == 405 and wrong.json()["reason"] == "method_not_allowed"


def test_token_covers_docs_and_openapi_but_not_probes(server):
    url, _ = server
    for path in ("/docs", "/openapi.json", "/metrics", "/v2/models/slimresnet"):
        response = httpx.get(f"{url}{path}")
        assert response.status_code == 401 and response.json()["reason"] == "unauthorized"
    for path in ("/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"):
        assert httpx.get(f"{url}{path}").status_code == 200
    schema = httpx.get(f"{url}/openapi.json", headers=AUTH).json()
    body = schema["paths"]["/v1/classify"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "multipart/form-data"}


def test_an_unhandled_error_is_a_counted_500_with_a_body_on_a_live_connection(server, client):
    _, service = server
    front = service.front
    original = front.submit

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    front.submit = broken
    try:
        response = client.post("/v1/classify", json={"images": [image().tolist()]})
    finally:
        front.submit = original
    assert response.status_code == 500 and response.json()["reason"] == "internal"
    assert "a bug" not in response.text  # details stay in the server's log
    after = client.post("/v1/classify", json={"images": [image().tolist()]})
    assert after.status_code == 200  # the same keep-alive client goes on
    metrics = client.get("/metrics").text
    assert 'hetsched_slim_http_requests_total{route="/v1/classify",status="500"} 1.0' in metrics


def read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the socket, and when it closed."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - started


def test_slowloris_head_is_closed_after_the_header_timeout(server):
    host, port = server[0].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        data, closed_after_s = read_until_closed(sock, 5)
    assert data == b"" and closed_after_s < 3


def test_slow_body_gets_408_and_the_connection_closed(server):
    host, port = server[0].removeprefix("http://").split(":")
    head = (
        "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode() + b'{"images": [')
        data, closed_after_s = read_until_closed(sock, 5)
    assert data.startswith(b"HTTP/1.1 408") and b"body_timeout" in data
    assert closed_after_s < 3


def test_overload_is_refused_from_the_headers_before_the_body_arrives():
    pool = FakePool(seconds=1.0)  # images stay in the system while the probe runs
    background, service = serve(pool, max_images_in_system=4)
    try:
        with httpx.Client(base_url=background.url, headers=AUTH, timeout=10) as http:
            body = {"images": [image(i).tolist() for i in range(4)]}
            with pytest.raises(httpx.ReadTimeout):  # fills the system, then waits
                http.post("/v1/classify", json=body, timeout=0.3)
        host, port = background.url.removeprefix("http://").split(":")
        head = (
            "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: 150000\r\n\r\n"
        )
        with socket.create_connection((host, int(port))) as sock:
            started = time.monotonic()
            sock.sendall(head.encode())  # the body never comes
            sock.settimeout(5)
            reply = sock.recv(65536)
            elapsed_s = time.monotonic() - started
    finally:
        background.stop()
    status, _, rest = reply.partition(b"\r\n")
    assert status == b"HTTP/1.1 429 Too Many Requests" and b"retry-after: " in rest.lower()
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["reason"] == "queue_full"
    assert elapsed_s < 0.4  # well before the body timeout (0.5 s): nothing was read
    assert service.metrics.rejected.labels("queue_full")._value.get() == 1


def infer_body(data, datatype="FP32", shape=(1, 3, 8, 8), **extra) -> dict:
    tensor = {"name": "input", "shape": list(shape), "datatype": datatype, "data": data}
    return {"inputs": [tensor], **extra}


def test_oip_infer_with_json_data_answers_label_probabilities_and_widths(client):
    images = np.stack([image(1), image(2)])
    body = infer_body(images.tolist(), shape=images.shape, id="r1", outputs=[{"name": "label"}])
    response = client.post("/v2/models/slimresnet/infer", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == "r1" and answer["model_name"] == "slimresnet"
    (label,) = answer["outputs"]
    assert label["name"] == "label" and label["shape"] == [2]
    assert label["data"] == [array_label(x) for x in images]
    full = client.post("/v2/models/slimresnet/infer", json=infer_body(images[0].ravel().tolist()))
    names = [o["name"] for o in full.json()["outputs"]]
    assert names == ["probabilities", "label", "widths"]


def test_oip_binary_data_extension(client):
    pixels = np.full((1, 3, 8, 8), 255, np.uint8)
    tensor = {"name": "input", "shape": [1, 3, 8, 8], "datatype": "UINT8"}
    header = json.dumps(
        {"inputs": [tensor | {"parameters": {"binary_data_size": pixels.nbytes}}]}
    ).encode()
    response = client.post(
        "/v2/models/slimresnet/infer",
        content=header + pixels.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status_code == 200, response.text
    normalised = (1.0 - 0.5) / 0.25  # SPEC's mean and std
    label = response.json()["outputs"][1]["data"][0]
    assert label == array_label(np.full((3, 8, 8), normalised, np.float32))
    short = client.post(
        "/v2/models/slimresnet/infer",
        content=header + pixels.tobytes()[:-1],
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert short.status_code == 400 and "binary_data_size" in short.json()["error"]


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v2/models/other/infer", infer_body([0.0] * 192), 404, "not served"),
        ("/v2/models/slimresnet/infer", infer_body([0.0] * 192, shape=(1, 3, 4, 4)), 422, "fit"),
        ("/v2/models/slimresnet/infer", infer_body([0.0] * 191), 422, "191 values"),
        ("/v2/models/slimresnet/infer", infer_body([300] * 192, "UINT8"), 400, "UINT8"),
        ("/v2/models/slimresnet/infer", infer_body([0.0] * 192, "INT8"), 400, "INT8"),
        (
            "/v2/models/slimresnet/infer",
            infer_body([0.0] * 192, parameters={"priority": 1}),
            400,
            "priority",
        ),
        (
            "/v2/models/slimresnet/infer",
            infer_body([0.0] * 192, outputs=[{"name": "logits"}]),
            400,
            "logits",
        ),
        ("/v2/models/slimresnet/infer", {"inputs": []}, 400, "exactly one input"),
    ],
)
def test_oip_refusals_name_the_problem(client, path, body, status, words):
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]


def test_oip_metadata_and_readiness(client):
    metadata = client.get("/v2/models/slimresnet").json()
    assert [i["datatype"] for i in metadata["inputs"]] == ["FP32", "UINT8"]
    assert client.get("/v2/models/slimresnet/ready").json() == {
        "name": "slimresnet",
        "ready": True,
    }
    assert client.get("/v2/models/slimresnet/versions/2").status_code == 404
    assert client.get("/v2").json()["extensions"] == ["binary_tensor_data"]
