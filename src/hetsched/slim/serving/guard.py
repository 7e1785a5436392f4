"""The ASGI layer every request passes first: authentication, early refusals, limits, counting.

It runs before routing and before a byte of the body is read, so everything it refuses costs a
few microseconds: a missing token (401), a declared body over the limit (413), and an inference
request that admission control would refuse anyway (429/503, from the request line and headers
alone: see :class:`EarlyAdmission`). It also bounds the time a body may take to arrive (408, the
connection closed), turns any exception that escapes a handler into a 500 with the project's
error body instead of a reset connection, and counts every answer, 500s included, by route and
status for ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable, Mapping

from prometheus_client import Counter
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hetsched.core.web import ServiceError, error_payload, token_refusal
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.metrics import ServingMetrics

LOG = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"})
"""Probes: answered without a token (they reveal nothing; orchestrators call them bare)."""

JSON = "application/json"
EarlyRefusal = Callable[[str, str, Mapping[str, str]], RequestError | None]
"""Given a request's method, path and headers (lower-case names), the refusal to answer now
(before its body is read), or None to let it through."""


def error_headers(error: ServiceError) -> dict[str, str]:
    """Retry-After on 429/503, ``Connection: close`` when the error says so (a 408: the client
    stopped sending, drop the socket), ``WWW-Authenticate`` on 401."""
    headers = {}
    if error.status in (429, 503):
        retry_after_s = error.retry_after_s if isinstance(error, RequestError) else None
        headers["Retry-After"] = str(max(1, math.ceil(retry_after_s or 1.0)))
    if error.close:
        headers["Connection"] = "close"
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return headers


def error_body(error: ServiceError) -> bytes:
    """The project's error body (:func:`hetsched.core.web.error_payload`)."""
    return json.dumps(error_payload(str(error), error.reason)).encode()


def error_response(error: ServiceError) -> Response:
    """The error as a response (for the app's exception handlers)."""
    return Response(error_body(error), error.status, error_headers(error), JSON)


def route_label(path: str) -> str:
    """The route a path counts under in metrics (model names folded: labels stay bounded)."""
    if path in OPEN_PATHS or path in ("/v1/classify", "/metrics", "/v2"):
        return path
    if path.startswith("/v2/models/"):
        for suffix in ("/infer", "/ready"):
            if path.endswith(suffix):
                return "/v2/models/{name}" + suffix
        return "/v2/models/{name}"
    return "other"


class Guard:
    """Pure ASGI middleware (no per-request task or body copy, unlike ``@app.middleware``).

    Args:
        app: The application behind it.
        metrics: Where answers are counted.
        token: Bearer token every path but :data:`OPEN_PATHS` needs; None: no authentication.
        max_body_bytes: A larger declared Content-Length is refused with 413 before reading.
        body_timeout_s: Time from the request's start within which its body must have arrived.
        early_refusal: Admission's verdict from the headers, for requests it may refuse.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: ServingMetrics,
        token: str | None,
        max_body_bytes: int,
        body_timeout_s: float,
        early_refusal: EarlyRefusal,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.early_refusal = early_refusal
        self._counters: dict[tuple[str, int], Counter] = {}
        """The answer counter's child per (route, status): bounded, as both are."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def counted_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            refusal = self._refusal(scope)
            if refusal is not None:
                await _respond(refusal, scope, receive, counted_send)
            else:
                await self.app(scope, self._timed(receive), counted_send)
        except ServiceError as error:  # raised by a handler or while reading the body
            if not status:
                await _respond(error, scope, receive, counted_send)
        except Exception:  # a bug in a handler: answer 500 with a body, keep the connection
            LOG.exception("unhandled error serving %s %s", scope["method"], scope["path"])
            if not status:
                internal = RequestError(500, "internal error (logged on the server)", "internal")
                await _respond(internal, scope, receive, counted_send)
        key = (route_label(scope["path"]), status[0] if status else 500)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = self.metrics.http_requests.labels(key[0], str(key[1]))
        counter.inc()

    def _refusal(self, scope: Scope) -> ServiceError | None:
        headers = _headers(scope)
        if scope["path"] not in OPEN_PATHS:
            refusal = token_refusal(headers.get("authorization"), self.token)
            if refusal is not None:
                return refusal
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return RequestError(
                413,
                f"body of {declared} bytes exceeds the limit of {self.max_body_bytes}",
                "body_too_large",
            )
        return self.early_refusal(scope["method"], scope["path"], headers)

    def _timed(self, receive: Receive) -> Receive:
        """``receive`` that raises 408 once the body has taken longer than its budget."""
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s

        async def timed_receive() -> Message:
            try:
                async with asyncio.timeout_at(deadline):
                    return await receive()
            except TimeoutError:
                raise RequestError(
                    408,
                    f"the request body did not arrive within {self.body_timeout_s:g} s",
                    "body_timeout",
                ) from None

        return timed_receive


async def _respond(error: ServiceError, scope: Scope, receive: Receive, send: Send) -> None:
    """Sends the error straight as ASGI messages: a refusal under overload is the common answer,
    so it skips building a Response object (the body is not read: the server discards it)."""
    body = error_body(error)
    headers = [(b"content-type", JSON.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error_headers(error).items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[str, str]:
    """The request headers as a dict of lower-case names to text (the last of repeated ones)."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
