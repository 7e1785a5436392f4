"""A minimal HTTP/1.1 client on asyncio streams, light enough to load a server from the same host.

A load generator on the same cores as the server it measures must cost the server as little CPU
as possible; a general client (httpx) spends about a millisecond of Python per request, which at
hundreds of requests per second takes a core from the server. This one sends pre-encoded request
bytes over pooled keep-alive connections and parses only the status line, the headers it needs
and a ``Content-Length`` or chunked body.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class HttpReply:
    """One response: status, lower-case headers, body."""

    status: int
    headers: dict[str, str]
    body: bytes


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response this client can read."""


def encode_request(
    method: str, path: str, host: str, headers: dict[str, str], body: bytes = b""
) -> bytes:
    """The bytes of one request (HTTP/1.1, keep-alive, with Content-Length)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpClient:
    """Keep-alive connections to one server, at most ``max_connections`` open at once.

    Failures are never retried (a load generator must see every dropped connection); instead a
    connection idle for longer than ``max_idle_s`` is closed rather than reused, so the client
    does not race the server's own keep-alive timeout.

    Args:
        url: ``http://host:port`` of the server.
        max_connections: Connections at most; a request waits for a free one beyond it.
        max_idle_s: Idle connections older than this are not reused (below the server's
            keep-alive timeout).
    """

    def __init__(self, url: str, max_connections: int = 1024, max_idle_s: float = 3.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"expected http://host:port, got {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.authority = parts.netloc
        self.max_idle_s = max_idle_s
        self._idle: list[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._slots = asyncio.Semaphore(max_connections)

    async def send(self, request: bytes, timeout_s: float) -> HttpReply:
        """Sends ``request`` (from :func:`encode_request`) and reads the reply.

        Raises:
            TimeoutError: No complete reply within ``timeout_s``.
            OSError, ProtocolError, asyncio.IncompleteReadError: The connection failed.
        """
        async with self._slots:
            reader, writer = await self._connection()
            try:
                async with asyncio.timeout(timeout_s):
                    writer.write(request)
                    reply, keep = await _read_reply(reader)
            except BaseException:
                writer.close()
                raise
            if keep:
                self._idle.append((time.monotonic(), reader, writer))
            else:
                writer.close()
            return reply

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        now = time.monotonic()
        while self._idle:
            since, reader, writer = self._idle.pop()
            if now - since < self.max_idle_s and not reader.at_eof():
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        """Closes the idle connections."""
        for _, _, writer in self._idle:
            writer.close()
        self._idle.clear()


async def _read_reply(reader: asyncio.StreamReader) -> tuple[HttpReply, bool]:
    """(reply, whether the connection may be reused)."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise ProtocolError("response head too large")
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ProtocolError(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    keep = headers.get("connection", "").lower() != "close"
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY_BYTES:
            raise ProtocolError(f"response body of {length} bytes")
        body = await reader.readexactly(length)
    else:
        body, keep = await reader.read(MAX_BODY_BYTES), False
    return HttpReply(int(rest[:3]), headers, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body: size lines and chunks up to the zero-size one, then the trailer lines."""
    chunks: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields: not needed
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise ProtocolError("chunked response body too large")
        chunks.append((await reader.readexactly(size + 2))[:size])
