"""Runs a :func:`hetsched.core.web.create_service_app` app on uvicorn with read deadlines.

uvicorn (h11) limits the size of a request's headers and closes idle kept-alive connections, but
it waits forever for a request that arrives a byte at a time (slowloris) or for a body that never
completes. :class:`GuardedH11Protocol` adds one deadline per request: the headers must arrive within
``header_timeout_s`` of the request's first byte (else 408 and the connection is closed), and the
whole body within ``body_timeout_s`` more (the app's :func:`~hetsched.core.web.read_body` answers
408 first; the protocol's deadline, a second later, closes connections whose body nobody reads).
It also answers malformed HTTP (a bad ``Content-Length``, a broken request line) in the project's
JSON error schema instead of uvicorn's plain text, and sends each answer's head and body in one
write (:class:`CoalescingTransport`).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from hetsched.core.errors import HetschedError
from hetsched.core.web import ServiceConfig, error_payload

# The protocol's deadline trails the app's body timeout by this much, so the app answers first.
BODY_GRACE_S = 1.0


def _raw_error(status: int, phrase: str, message: str, reason: str) -> bytes:
    """A complete HTTP/1.1 error answer that closes the connection, written past h11."""
    body = json.dumps(error_payload(message, reason)).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class CoalescingTransport:
    """A transport that holds the writes of one event-loop step and sends them as one.

    uvicorn writes a response's head and body separately; on a busy machine each write can wake
    the client, who then waits for the rest. Joined, the whole answer leaves in one send. Writes
    are held only until the current step of the loop ends (or the connection is closed), so a
    response that waits for flow control, or streams, still goes out as it is written.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a per-request read deadline and JSON 400 answers."""

    def __init__(self, *args: Any, service: ServiceConfig, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.service = service
        self.read_deadline: asyncio.TimerHandle | None = None

    def _arm(self, delay_s: float) -> None:
        self._disarm()
        self.read_deadline = self.loop.call_later(delay_s, self._on_read_deadline)

    def _disarm(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = CoalescingTransport(transport, self.loop)  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        waiting_for_head = self.conn.their_state is h11.IDLE
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.IDLE and self.read_deadline is None and data:
            self._arm(self.service.header_timeout_s)  # part of a request's head has arrived
        elif state is h11.SEND_BODY and (waiting_for_head or self.read_deadline is None):
            self._arm(self.service.body_timeout_s + BODY_GRACE_S)  # head done, body under way
        elif state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()  # the request is complete (or the connection is ending)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is not h11.SEND_BODY:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _on_read_deadline(self) -> None:
        self.read_deadline = None
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            message = (
                f"the request's headers did not arrive within {self.service.header_timeout_s:g} s"
            )
            self.transport.write(_raw_error(408, "Request Timeout", message, "header_timeout"))
        elif self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        self.transport.write(_raw_error(400, "Bad Request", msg, "bad_http"))
        self.transport.close()


class ServiceServer:
    """uvicorn serving a service app with ``config``'s limits, TLS and deadlines.

    Use :meth:`serve` in a command's foreground, or :meth:`start` / :meth:`stop` to run it on a
    thread (tests, benchmarks, a process that does other work).
    """

    def __init__(self, app: FastAPI, config: ServiceConfig) -> None:
        def protocol(*args: Any, **kwargs: Any) -> GuardedH11Protocol:
            return GuardedH11Protocol(*args, service=config, **kwargs)

        self.config = config
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=config.host,
                port=config.port,
                http=protocol,  # type: ignore[arg-type]  # a protocol factory, as uvicorn calls it
                timeout_keep_alive=max(1, round(config.keep_alive_s)),
                h11_max_incomplete_event_size=config.max_header_bytes,
                ssl_certfile=config.tls_certfile,
                ssl_keyfile=config.tls_keyfile,
                ssl_ca_certs=config.tls_client_ca,
                ssl_cert_reqs=ssl.CERT_REQUIRED if config.tls_client_ca else ssl.CERT_NONE,
                log_level="warning",
                access_log=False,
                server_header=False,
                lifespan="on",
            )
        )
        self._thread: threading.Thread | None = None
        self.url = ""

    def _bound_url(self) -> str:
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"{self.config.scheme}://{shown}:{port}"

    def start(self, timeout_s: float = 60.0) -> str:
        """Serves on a daemon thread; returns the base URL once the app's start-up is done.

        Raises:
            HetschedError: If the server did not start (port taken, bad TLS files, ...).
        """
        self._thread = threading.Thread(target=self._server.run, name="uvicorn", daemon=True)
        self._thread.start()
        deadline_s = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline_s:
                raise HetschedError(
                    f"the HTTP server did not start on {self.config.host}:{self.config.port}"
                )
            time.sleep(0.02)
        self.url = self._bound_url()
        return self.url

    def stop(self) -> None:
        """Stops accepting, runs the app's shut-down, joins the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()

    def serve(self) -> None:
        """Serves in the calling thread until interrupted (Ctrl-C, SIGTERM)."""
        self._server.run()
