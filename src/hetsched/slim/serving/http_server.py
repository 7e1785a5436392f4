"""uvicorn, configured so that no client can hold the server's sockets or tasks without bound.

uvicorn closes idle keep-alive connections and caps concurrent connections (``limit_concurrency``:
beyond it, 503), but it has no limit on how long a request head may take to arrive: a client
that opens a socket and sends a header byte every few seconds (slowloris) holds it forever, and
admission control never sees it. :class:`HeadTimeoutProtocol` closes a connection whose request
head is not complete within ``header_timeout_s`` of opening it or of the previous answer. The
body's own deadline is enforced per request by :class:`~.guard.Guard` (408).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hetsched.core.errors import HetschedError
from hetsched.slim.serving.config import HttpConfig


class HeadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus a deadline on each request head (slowloris)."""

    header_timeout_s = 10.0
    """Set per server by :func:`uvicorn_config` (uvicorn builds protocols from the class)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self.loop.call_later(self.header_timeout_s, self._close_if_no_new_request, self.cycle)

    def _close_if_no_new_request(self, cycle_then: Any) -> None:
        """Closes the connection unless a request head has completed since the deadline was
        armed (a new request cycle exists): an answered request or a request in progress is never
        cut, only a head that never finished."""
        if self.cycle is cycle_then and not self.transport.is_closing():
            self.transport.close()


def uvicorn_config(app: ASGIApp, host: str, port: int, http: HttpConfig) -> uvicorn.Config:
    """uvicorn's config for ``app`` with the limits of ``http``."""
    protocol = type(
        "BoundedHttpProtocol", (HeadTimeoutProtocol,), {"header_timeout_s": http.header_timeout_s}
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        limit_concurrency=http.max_connections,
        timeout_keep_alive=http.keep_alive_s,
        log_level="warning",
        access_log=False,  # one log call per request, refusals included: not at 1000s per s
        lifespan="on",
    )


def serve_forever(
    app: ASGIApp,
    host: str,
    port: int,
    http: HttpConfig,
    startup: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serves ``app`` until SIGINT/SIGTERM, then shuts down gracefully (the app's shutdown runs).

    ``startup`` runs on the server's event loop before the socket opens. It is not part of the
    app's lifespan because starlette reports any exception raised there as a traceback: an
    operator's mistake (a bad device or checkpoint in the config) should end as the one-line
    :class:`~hetsched.core.errors.HetschedError` it is, which this function lets through as is.

    Raises:
        ServeError: If the server never started (port in use, the app's startup failed).
    """
    server = uvicorn.Server(uvicorn_config(app, host, port, http))

    async def start_then_serve() -> None:
        if startup is not None:
            await startup()
        await server.serve()

    # uvicorn re-raises the captured Ctrl-C after its graceful shutdown: that is the normal end,
    # and so is a Ctrl-C during start-up.
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner,
    ):
        runner.run(start_then_serve())
        if not server.started:
            raise ServeError(f"the HTTP server on {host}:{port} did not start (see the log above)")


class ServeError(HetschedError):
    """The HTTP server could not start."""


class BackgroundServer:
    """uvicorn serving ``app`` on a thread of its own (tests, benchmarks, the load generator's
    end-to-end runs); :meth:`start` returns once the app's startup (the runtime) is done.

    Args:
        app: The ASGI app.
        http: The HTTP limits.
        host: Address to bind (loopback by default).
        port: Port; 0 picks a free one (read :attr:`url` after start).
    """

    def __init__(
        self,
        app: ASGIApp,
        http: HttpConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._server = uvicorn.Server(uvicorn_config(app, host, port, http or HttpConfig()))
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
