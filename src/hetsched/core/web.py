"""One hardened HTTP service stack (FastAPI): limits, token, probes, metrics, one error schema.

Every HTTP service of the project builds its app with :func:`create_service_app` and runs it with
:class:`hetsched.core.web_server.ServiceServer`, so they share one set of defences:

* **Error schema.** Every error, from a malformed body to an unknown path, a wrong method or an
  unexpected exception, is answered as JSON ``{"error": <what is wrong>, "reason": <a stable
  snake_case code>}`` with a 4xx (or, for a bug, 500) status, never a traceback or a dropped
  connection. Handlers raise :class:`ServiceError` to answer one.
* **Body limit.** A request whose ``Content-Length`` exceeds ``max_body_bytes`` is refused with
  413 before anything is read; a body that grows past it while streaming is cut off at the limit.
  Both answers close the connection, so the client cannot keep uploading.
* **Read timeouts.** :func:`read_body` gives up on a body that has not fully arrived within
  ``body_timeout_s`` (408); slow headers are refused by the server's protocol (see
  :mod:`hetsched.core.web_server`).
* **Bearer token** (optional): every path except the probes needs ``Authorization: Bearer
  <token>``, including ``/metrics``, ``/docs`` and ``/openapi.json``.
* **Probes and metrics.** ``/healthz`` (the process answers), ``/readyz`` (the service's own
  readiness callback), ``/metrics`` (Prometheus text: requests by route and status, errors by
  reason, latency histogram by route; services add their own metrics to the same registry).

The slim serving API (``hetsched.slim.serving.app``) grew the same defences first; its guard uses
this module's error schema, error type and token check, and adds what serving needs on top
(admission's refusals from the headers, Retry-After).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import ssl
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from hetsched.core.errors import HetschedError

PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})
OTHER_ROUTE = "other"  # the metrics label of every path that matched no route
# Latency buckets (s) from 0.5 ms: the extender's target is a few milliseconds.
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ServiceError(HetschedError):
    """An HTTP answer other than success: status, message and a stable ``reason`` code.

    Args:
        status: The HTTP status (4xx for the client's fault).
        message: What is wrong, for a person.
        reason: A snake_case code for programs (``body_too_large``, ``bad_request``, ...).
        close: Close the connection after answering (the rest of the request is not read).
    """

    def __init__(self, status: int, message: str, reason: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.close = close


@dataclass(frozen=True)
class ServiceConfig:
    """Where and how a service listens, and its limits (all enforced per request).

    Args:
        host: Address to bind; loopback by default. Anything else without a token is exposed.
        port: Port; 0 picks a free one.
        token: Bearer token every non-probe path needs; None: no authentication.
        max_body_bytes: Largest request body accepted.
        header_timeout_s: Time a client has to send a request's headers (slowloris defence).
        body_timeout_s: Time a client has to send a request's body once the service reads it.
        keep_alive_s: How long an idle kept-alive connection stays open.
        max_header_bytes: Largest request line plus headers accepted.
        tls_certfile: PEM certificate to serve HTTPS with (needs ``tls_keyfile``).
        tls_keyfile: PEM private key of ``tls_certfile``.
        tls_client_ca: PEM CA bundle; if set, clients must present a certificate it signed
            (mutual TLS: how kube-scheduler authenticates to an extender, via its tlsConfig).
    """

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    max_body_bytes: int = 8 * 2**20
    header_timeout_s: float = 5.0
    body_timeout_s: float = 10.0
    keep_alive_s: float = 5.0
    max_header_bytes: int = 32 * 2**10
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    tls_client_ca: Path | None = None

    def __post_init__(self) -> None:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise HetschedError("TLS needs both a certificate and a key file")
        if self.tls_client_ca is not None and self.tls_certfile is None:
            raise HetschedError("client certificates (mutual TLS) need the server's TLS files")
        for path in (self.tls_certfile, self.tls_keyfile, self.tls_client_ca):
            if path is not None and not Path(path).is_file():
                raise HetschedError(f"TLS file not found: {path}")
        if not 0 <= self.port <= 65535:
            raise HetschedError(f"port {self.port} is not in 0-65535")
        self._check_tls_files()
        if self.token is not None and not self.token.strip():
            raise HetschedError("the bearer token is empty")
        limits = (self.max_body_bytes, self.max_header_bytes)
        timeouts = (self.header_timeout_s, self.body_timeout_s, self.keep_alive_s)
        if min(limits) <= 0 or min(timeouts) <= 0:
            raise HetschedError("body/header limits and timeouts must be positive")

    def _check_tls_files(self) -> None:
        """Loads the TLS files once here, so a wrong file is a one-line error at start-up rather
        than a traceback from inside the server (or a password prompt: no key may be
        encrypted, as there is no option to give its password)."""
        if self.tls_certfile is None or self.tls_keyfile is None:
            return
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.tls_certfile, self.tls_keyfile, password=lambda: b"")
        except ssl.SSLError as error:
            raise HetschedError(
                f"TLS: {self.tls_certfile} and {self.tls_keyfile} are not a PEM certificate and"
                f" its unencrypted private key ({error.reason or error})"
            ) from None
        if self.tls_client_ca is not None:
            try:
                context.load_verify_locations(self.tls_client_ca)
            except ssl.SSLError as error:
                raise HetschedError(
                    f"TLS: {self.tls_client_ca} is not a PEM CA bundle ({error.reason or error})"
                ) from None

    @property
    def scheme(self) -> str:
        return "https" if self.tls_certfile else "http"

    def exposure_warning(self) -> str | None:
        """A warning if the service listens beyond this machine unauthenticated, else None."""
        if self.token is not None or self.tls_client_ca is not None or is_loopback(self.host):
            return None
        return (
            f"warning: listening on {self.host} without a bearer token or client certificates: "
            "anyone who can reach this port can call the service (set a token or a client CA, "
            "or bind 127.0.0.1)"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def token_refusal(authorization: str | None, token: str | None) -> ServiceError | None:
    """401 unless ``authorization`` (the header's text) is ``Bearer <token>``; None when no
    token is configured. The comparison takes the same time whatever the given token."""
    if token is None:
        return None
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
        return None
    return ServiceError(401, "missing or wrong bearer token", "unauthorized")


def error_payload(message: str, reason: str) -> dict[str, str]:
    """The project's error schema."""
    return {"error": message, "reason": reason}


def json_response(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A JSON response from a payload, or from already-encoded JSON bytes (fast encoders)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return Response(body, status, headers=headers, media_type="application/json")


ERROR_REASON_KEY = "hetsched.error_reason"  # where a handler leaves its reason for the metrics


def error_response(error: ServiceError) -> Response:
    """The JSON answer to ``error`` (closing the connection if it says so)."""
    headers = {"Connection": "close"} if error.close else {}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return json_response(error_payload(str(error), error.reason), error.status, headers)


class ServiceMetrics:
    """The service's Prometheus registry with the shared HTTP metrics; add service metrics to
    :attr:`registry`."""

    def __init__(self, prefix: str) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{prefix}_http_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.errors = Counter(
            f"{prefix}_http_errors",
            "HTTP requests answered with an error, by route and reason.",
            ["route", "reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            f"{prefix}_http_request_duration_seconds",
            "Time from the request's headers to the end of the answer, by route.",
            ["route"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


async def read_body(request: Request, config: ServiceConfig) -> bytes:
    """The request body within ``config``'s size and time limits.

    Raises:
        ServiceError: 413 past ``max_body_bytes``, 408 after ``body_timeout_s``, 400 if the
            client went away mid-body.
    """
    chunks: list[bytes] = []

    async def collect() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise ServiceError(
                    413,
                    f"body exceeds the limit of {config.max_body_bytes} bytes",
                    "body_too_large",
                    close=True,
                )
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), config.body_timeout_s)
    except TimeoutError:
        raise ServiceError(
            408,
            f"the body did not arrive within {config.body_timeout_s:g} s",
            "body_timeout",
            close=True,
        ) from None
    except (ClientDisconnect, OSError):
        raise ServiceError(400, "the client went away mid-body", "disconnected") from None
    return b"".join(chunks)


def _validation_message(error: RequestValidationError) -> str:
    first = error.errors()[0] if error.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "request"
    return f"{where}: {first.get('msg', 'invalid')}"


class _GuardMiddleware:
    """Pure ASGI: token, Content-Length check, and per-request metrics around the app."""

    def __init__(self, app: ASGIApp, config: ServiceConfig, metrics: ServiceMetrics) -> None:
        self.app, self.config, self.metrics = app, config, metrics

    def _refusal(self, scope: Scope) -> ServiceError | None:
        raw_headers = scope.get("headers") or []
        # h11 bounds only headers that arrive in pieces; one packet of huge headers is caught here.
        header_bytes = sum(len(k) + len(v) for k, v in raw_headers)
        if header_bytes > self.config.max_header_bytes:
            limit = self.config.max_header_bytes
            message = f"{header_bytes} bytes of headers exceed the limit of {limit}"
            return ServiceError(431, message, "headers_too_large", close=True)
        headers = dict(raw_headers)
        if scope["path"] not in PUBLIC_PATHS:
            authorization = headers.get(b"authorization", b"").decode("latin-1")
            refusal = token_refusal(authorization, self.config.token)
            if refusal is not None:
                return refusal
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            return ServiceError(400, "Content-Length is not a number", "bad_request", close=True)
        if declared is not None and int(declared) > self.config.max_body_bytes:
            return ServiceError(
                413,
                f"body of {int(declared)} bytes exceeds the limit of {self.config.max_body_bytes}",
                "body_too_large",
                close=True,
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_s = time.perf_counter()
        status = {"code": 500}

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        refusal = self._refusal(scope)
        try:
            if refusal is not None:
                await error_response(refusal)(scope, receive, recording_send)
            else:
                await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or (
                scope["path"] if scope["path"] in PUBLIC_PATHS | {"/metrics"} else OTHER_ROUTE
            )
            code = status["code"]
            self.metrics.requests.labels(label, str(code)).inc()
            if code >= 400:
                reason = refusal.reason if refusal is not None else scope.get(ERROR_REASON_KEY)
                self.metrics.errors.labels(label, reason or str(code)).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started_s)


def create_service_app(
    title: str,
    config: ServiceConfig,
    *,
    metrics_prefix: str,
    ready: Callable[[], bool] = lambda: True,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    """A FastAPI app with the shared defences, probes and metrics; add the service's routes.

    Args:
        title: Shown in the OpenAPI document.
        config: Limits and token (the same object the server is started with).
        metrics_prefix: Prefix of the metric names (e.g. ``hetsched_extender``).
        ready: Answers /readyz: True once the service can do its work.
        lifespan: Start-up / shut-down of the service's own resources (background tasks).

    The app's ``state.metrics`` is its :class:`ServiceMetrics`, ``state.config`` the config.
    """
    app = FastAPI(title=title, lifespan=lifespan)
    metrics = ServiceMetrics(metrics_prefix)
    app.state.metrics, app.state.config = metrics, config

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, error: ServiceError) -> Response:
        request.scope[ERROR_REASON_KEY] = error.reason
        return error_response(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        reasons = {404: "not_found", 405: "method_not_allowed"}
        reason = request.scope[ERROR_REASON_KEY] = reasons.get(error.status_code, "http_error")
        return json_response(error_payload(str(error.detail), reason), error.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> Response:
        request.scope[ERROR_REASON_KEY] = "bad_request"
        return json_response(error_payload(_validation_message(error), "bad_request"), 400)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> Response:
        # The traceback goes to the server's log (uvicorn logs what this re-raises), not the client.
        request.scope[ERROR_REASON_KEY] = "internal"
        return json_response(error_payload("internal error", "internal"), 500)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> Response:
        if ready():
            return json_response({"status": "ready"})
        return json_response(error_payload("the service is not ready yet", "not_ready"), 503)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(_GuardMiddleware, config=config, metrics=metrics)
    return app
