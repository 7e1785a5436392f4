"""The one way our small stdlib HTTP servers (extender, fake API server, node agent) answer."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send_json_body(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    """Writes an already-encoded JSON ``body`` with its status and a Content-Length.

    The length lets a client keep the connection open (HTTP/1.1 keep-alive) instead of reading
    to its end, which is why every server here sends it.
    """
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
