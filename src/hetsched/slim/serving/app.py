"""The HTTP API (FastAPI on uvicorn) in front of a :class:`~.runtime.ServingRuntime`.

Routes:

* ``POST /v1/classify``: one or more images, as PNG/JPEG files (``multipart/form-data``, field
  ``image``, repeated) or raw arrays (``application/json``: ``{"images": [...]}``; see
  :mod:`.images`). Optional ``deadline_s`` (form field, JSON field or ``X-Deadline-S`` header) and
  ``top_k``. Answers one result per image: label, top-k softmax scores, the width tuple used, the
  servers that ran each segment, latency. Malformed input gets a 4xx naming the problem; overload
  gets 429/503 with a reason (admission control); an accepted image that misses its deadline 504.
* ``GET /healthz``: the process is up. ``GET /readyz``: at least one server is serving.
* ``GET /metrics``: Prometheus text format.

With a token configured, ``/v1/*`` and ``/metrics`` need ``Authorization: Bearer <token>``; the
probes stay open (they reveal nothing and orchestrators call them without credentials).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from hetsched.slim.serving.front import ImageResult
from hetsched.slim.serving.images import InputSpec, RequestError, decode_array, decode_image_file
from hetsched.slim.serving.runtime import ServingRuntime

CLASSIFY = "/v1/classify"


def create_app(runtime: ServingRuntime, *, manage_runtime: bool = True) -> FastAPI:
    """The FastAPI app serving ``runtime``.

    Args:
        runtime: The serving system.
        manage_runtime: Start the runtime when the app starts and stop it when the app stops.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start()
        try:
            yield
        finally:
            if manage_runtime:
                await runtime.stop()

    app = FastAPI(title="hetsched Slim Scheduler", lifespan=lifespan)
    config = runtime.config
    metrics = runtime.metrics

    @app.exception_handler(RequestError)
    async def request_error(_: Request, error: RequestError) -> JSONResponse:
        headers = {"Retry-After": "1"} if error.status in (429, 503) else None
        return JSONResponse(
            {"error": str(error), "reason": error.reason}, error.status, headers=headers
        )

    @app.middleware("http")
    async def count_and_authenticate(request: Request, call_next):
        route = request.url.path
        protected = route.startswith("/v1/") or route == "/metrics"
        if protected and config.token is not None and not _token_ok(request, config.token):
            response: Response = JSONResponse(
                {"error": "missing or wrong bearer token", "reason": "unauthorized"},
                401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            response = await call_next(request)
        known = route in (CLASSIFY, "/healthz", "/readyz", "/metrics")
        metrics.http_requests.labels(route if known else "other", str(response.status_code)).inc()
        return response

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        front = runtime.front
        up = 0 if front is None else front.servers_up()
        if up == 0:
            return JSONResponse({"status": "not ready", "servers_up": 0}, 503)
        return JSONResponse({"status": "ready", "servers_up": up})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post(CLASSIFY)
    async def classify(request: Request) -> JSONResponse:
        started_s = time.perf_counter()
        front, spec = runtime.front, runtime.input_spec
        if front is None or spec is None:
            raise RequestError(503, "the servers are still starting", "starting")
        images, options = await _read_images(request, runtime, spec)
        deadline_s = _float_option(
            options.get("deadline_s", request.headers.get("x-deadline-s")), "deadline_s"
        )
        if deadline_s is None:
            deadline_s = config.admission.default_deadline_s
        top_k = _int_option(options.get("top_k"), "top_k") or config.top_k
        futures = front.submit(images, deadline_s)
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        failures = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
        if failures:
            index, first = failures[0]
            if not isinstance(first, RequestError):
                raise first
            raise RequestError(
                first.status,
                f"{len(failures)} of {len(images)} image(s) failed; image {index}: {first}",
                first.reason,
            )
        metrics.request_seconds.observe(time.perf_counter() - started_s)
        return JSONResponse(
            {
                "results": [
                    _result_json(r, spec.class_names, top_k)
                    for r in outcomes
                    if isinstance(r, ImageResult)  # all of them: no failures
                ]
            }
        )

    return app


def _token_ok(request: Request, token: str) -> bool:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode())


async def _read_body(request: Request, max_bytes: int) -> bytes:
    """The body; 413 as soon as it passes ``max_bytes``, whatever Content-Length says."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(
            413, f"body of {declared} bytes exceeds the limit of {max_bytes}", "body_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(
                413, f"body exceeds the limit of {max_bytes} bytes", "body_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_images(
    request: Request, runtime: ServingRuntime, spec: InputSpec
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Decodes the body into model inputs (shaped by ``spec``) and the request's options, by
    content type."""
    limits = runtime.config.admission
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";")[0].strip().lower()
    if media_type not in ("multipart/form-data", "application/json"):
        raise RequestError(
            415,
            f"Content-Type {content_type or '(none)'!r} is not supported; send"
            " multipart/form-data with PNG/JPEG files in field 'image', or application/json"
            " with {'images': [...]} arrays",
            "unsupported_content_type",
        )
    body = await _read_body(request, limits.max_body_bytes)
    if media_type == "application/json":
        items, options = _json_images(body)
        _check_count(len(items), limits.max_images_per_request)
        images = [
            decode_array(item, spec, index=i, max_bytes=limits.max_image_bytes)
            for i, item in enumerate(items)
        ]
        return images, options
    files, options = await _form_files(request, body, limits.max_image_bytes)
    _check_count(len(files), limits.max_images_per_request)
    images = []
    for index, (data, file_type) in enumerate(files):
        images.append(
            decode_image_file(
                data, file_type, spec, index=index, max_pixels=limits.max_image_pixels
            )
        )
    return images, options


def _json_images(body: bytes) -> tuple[list[Any], dict[str, Any]]:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RequestError(400, f"body is not valid JSON: {error}", "bad_json") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise RequestError(400, "JSON body must be an object with a list 'images'", "bad_json")
    return data["images"], {k: v for k, v in data.items() if k in ("deadline_s", "top_k")}


async def _form_files(
    request: Request, body: bytes, max_image_bytes: int
) -> tuple[list[tuple[bytes, str | None]], dict[str, Any]]:
    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    try:
        form = await MultiPartParser(
            request.headers, stream(), max_part_size=max_image_bytes
        ).parse()
    except MultiPartException as error:
        raise RequestError(
            400, f"malformed multipart body: {error.message}", "bad_multipart"
        ) from None
    files = []
    for index, upload in enumerate(form.getlist("image")):
        if not isinstance(upload, UploadFile):
            raise RequestError(
                400, f"image {index}: field 'image' must be a file upload", "bad_multipart"
            )
        data = await upload.read()
        if len(data) > max_image_bytes:
            raise RequestError(
                413,
                f"image {index}: {len(data)} bytes exceeds the limit of {max_image_bytes}",
                "image_too_large",
            )
        files.append((data, upload.content_type))
    options = {k: form.get(k) for k in ("deadline_s", "top_k") if form.get(k) is not None}
    return files, options


def _check_count(count: int, limit: int) -> None:
    if count == 0:
        raise RequestError(400, "no images in the request", "no_images")
    if count > limit:
        raise RequestError(
            413, f"{count} images in one request exceeds the limit of {limit}", "too_many_images"
        )


def _float_option(value: Any, name: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RequestError(400, f"{name} must be a number, got {value!r}", "bad_option") from None
    if not number > 0:
        raise RequestError(400, f"{name} must be > 0, got {value!r}", "bad_option")
    return number


def _int_option(value: Any, name: str) -> int | None:
    number = _float_option(value, name)
    if number is not None and number != int(number):
        raise RequestError(400, f"{name} must be a whole number, got {value!r}", "bad_option")
    return None if number is None else int(number)


def _result_json(result: ImageResult, class_names: tuple[str, ...], top_k: int) -> dict:
    logits = result.logits.astype(np.float64)
    scores = np.exp(logits - logits.max())
    scores /= scores.sum()
    order = np.argsort(-scores)[: min(top_k, len(scores))]
    return {
        "label": int(order[0]),
        "class_name": class_names[int(order[0])],
        "top_k": [{"label": int(i), "score": float(scores[i])} for i in order],
        "widths": list(result.widths),
        "servers": list(result.servers),
        "latency_s": result.latency_s,
        "queue_s": result.queue_s,
        "compute_s": result.compute_s,
        "reroutes": result.reroutes,
    }


class BackgroundServer:
    """uvicorn serving ``app`` on a thread of its own (tests, benchmarks, the load generator's
    end-to-end runs); :meth:`start` returns once the app's startup (the runtime) is done.

    Args:
        app: The ASGI app.
        host: Address to bind (loopback by default).
        port: Port; 0 picks a free one (read :attr:`url` after start).
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self._server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        )
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self, timeout_s: float = 180.0) -> str:
        """Starts serving; returns the base URL.

        Raises:
            RuntimeError: If startup failed or took longer than ``timeout_s``.
        """
        self._thread = threading.Thread(target=self._server.run, name="uvicorn", daemon=True)
        self._thread.start()
        deadline_s = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline_s:
                raise RuntimeError("the HTTP server did not start (see the log above)")
            time.sleep(0.05)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        """Stops accepting, runs the app's shutdown (the runtime's), joins the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
