"""The HTTP API (FastAPI on uvicorn) in front of a serving system (:class:`~.service.Service`).

Routes:

* ``POST /v1/classify``: one or more images, as PNG/JPEG files (``multipart/form-data``, field
  ``image``, repeated) or raw arrays (``application/json``: ``{"images": [...]}``; see
  :mod:`.images`). Options ``deadline_s``, ``top_k``, ``min_width`` (form or JSON fields; the
  deadline also as the ``X-Deadline-S`` header, which lets admission refuse before the body is
  read). Answers one result per image: label, top-k softmax scores, the width tuple used, the
  servers that ran each segment, latency. Malformed input gets a 4xx naming the problem; overload
  gets 429/503 with a reason and Retry-After (admission control); an accepted image that misses
  its deadline 504.
* The Open Inference Protocol's ``/v2/...`` routes (:mod:`.oip`).
* ``GET /healthz``: the process is up. ``GET /readyz``: at least one server is serving.
* ``GET /metrics``: Prometheus text format.

Every answer that is not a success, unknown paths included, has the body
``{"error": message, "reason": cause}``. With a token configured every path but the health
probes needs ``Authorization: Bearer <token>`` (the API docs and ``/openapi.json`` too).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from hetsched.slim.serving.answers import classify_json, gather_results
from hetsched.slim.serving.guard import Guard, error_response
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.oip import oip_router
from hetsched.slim.serving.options import DEADLINE_HEADER, RequestOptions, header_deadline_s
from hetsched.slim.serving.request_body import Decoder, read_classify
from hetsched.slim.serving.service import Service

CLASSIFY = "/v1/classify"
HTTP_REASONS = {404: "not_found", 405: "method_not_allowed"}


def is_inference(method: str, path: str) -> bool:
    """Whether a request sends images to the servers (what admission control may refuse)."""
    return method == "POST" and (
        path == CLASSIFY or (path.startswith("/v2/models/") and path.endswith("/infer"))
    )


def create_app(service: Service) -> FastAPI:
    """The FastAPI app serving ``service``: its lifespan starts the service (unless the caller
    already has: the CLI does, to report start-up errors in one line) and stops it."""
    config = service.config
    decoder = Decoder(config.http.decode_threads)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if service.front is None:
            await service.start()
        try:
            yield
        finally:
            await service.stop()
            decoder.close()

    app = FastAPI(title="hetsched Slim Scheduler", version="1", lifespan=lifespan)
    metrics = service.metrics

    def early_refusal(method: str, path: str, headers: Mapping[str, str]) -> RequestError | None:
        """Admission's verdict from the headers: one image (the least a request can hold) with
        the header's deadline; a refusal here costs no body read and no decoding."""
        if not is_inference(method, path):
            return None
        if service.front is None:
            return RequestError(503, "the servers are still starting", "starting", 1.0)
        try:
            deadline_s = header_deadline_s(headers.get(DEADLINE_HEADER))
        except RequestError as error:
            return error
        return service.front.check(1, deadline_s or config.admission.default_deadline_s)

    app.add_middleware(
        Guard,
        metrics=metrics,
        token=config.token,
        max_body_bytes=config.admission.max_body_bytes,
        body_timeout_s=config.http.body_timeout_s,
        early_refusal=early_refusal,
    )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        reason = HTTP_REASONS.get(error.status_code, "http_error")
        message = f"{request.method} {request.url.path}: {error.detail}"
        return error_response(RequestError(error.status_code, message, reason))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, error: RequestValidationError) -> Response:
        fields = "; ".join(
            f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors()
        )
        return error_response(RequestError(422, fields, "bad_request"))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        front = service.front
        up = 0 if front is None else front.servers_up()
        if up == 0:
            return JSONResponse({"status": "not ready", "servers_up": 0}, 503)
        return JSONResponse({"status": "ready", "servers_up": up})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post(CLASSIFY, openapi_extra=_classify_openapi())
    async def classify(request: Request) -> JSONResponse:
        started_s = time.perf_counter()
        front, spec = service.front, service.input_spec
        if front is None or spec is None:
            raise RequestError(503, "the servers are still starting", "starting", 1.0)
        inputs = await read_classify(request, spec, config.admission, decoder)
        options = inputs.options
        deadline_s = options.deadline_s or header_deadline_s(request.headers.get(DEADLINE_HEADER))
        futures = front.submit(
            inputs.images,
            deadline_s or config.admission.default_deadline_s,
            options.min_width,
        )
        results = await gather_results(futures)
        metrics.request_seconds.observe(time.perf_counter() - started_s)
        top_k = options.top_k or config.top_k
        return JSONResponse(
            {"results": [classify_json(r, spec.class_names, top_k) for r in results]}
        )

    app.include_router(oip_router(service, decoder))
    return app


def _classify_openapi() -> dict[str, Any]:
    """The request bodies of ``/v1/classify`` for the OpenAPI page (the handler reads the body
    itself, to bound it and decode it off the event loop, so FastAPI cannot infer them)."""
    option_schemas = RequestOptions.model_json_schema()["properties"]
    array = {
        "oneOf": [
            {"type": "array", "description": "C x H x W nested lists, normalised"},
            {
                "type": "object",
                "properties": {
                    "b64": {"type": "string"},
                    "shape": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                    "dtype": {"enum": ["float32", "uint8"]},
                },
                "required": ["b64", "shape"],
                "additionalProperties": False,
            },
        ]
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {"images": {"type": "array", "items": array}}
                        | option_schemas,
                        "required": ["images"],
                        "additionalProperties": False,
                    }
                },
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "image": {
                                "type": "array",
                                "items": {"type": "string", "format": "binary"},
                            }
                        }
                        | option_schemas,
                        "required": ["image"],
                    }
                },
            },
        }
    }
