"""The shared HTTP stack over real sockets: error schema, limits, deadlines, token, TLS, metrics."""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import Request
from pydantic import BaseModel

from hetsched.core.errors import HetschedError
from hetsched.core.web import ServiceConfig, ServiceError, create_service_app, read_body
from hetsched.core.web_server import CoalescingTransport, ServiceServer

LIMIT_BYTES = 1024


class Item(BaseModel):
    n: int


def serve(config: ServiceConfig, ready: bool = True) -> ServiceServer:
    app = create_service_app("test", config, metrics_prefix="test", ready=lambda: ready)

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        body = await read_body(request, config)
        if body == b"teapot":
            raise ServiceError(418, "short and stout", "teapot")
        return {"bytes": len(body)}

    @app.post("/item")
    async def item(value: Item) -> dict:
        return {"n": value.n}

    @app.get("/boom")
    async def boom() -> dict:
        raise RuntimeError("secret internals")

    server = ServiceServer(app, config)
    server.start()
    return server


@pytest.fixture
def service() -> Iterator[tuple[str, ServiceConfig]]:
    config = ServiceConfig(
        max_body_bytes=LIMIT_BYTES, header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1
    )
    server = serve(config)
    yield server.url, config
    server.stop()


def raw_exchange(url: str, data: bytes, *, trickle_s: float = 0.0, wait_s: float = 5.0) -> bytes:
    """Sends ``data`` (a byte at a time every ``trickle_s`` if set) and reads until close."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        try:
            if trickle_s:
                for byte in data:
                    sock.sendall(bytes([byte]))
                    time.sleep(trickle_s)
            else:
                sock.sendall(data)
        except OSError:  # the server may close on us mid-send: that is the point
            pass
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_success_and_every_error_in_the_json_schema(service):
    url, _ = service
    assert httpx.post(f"{url}/echo", content=b"abc").json() == {"bytes": 3}
    cases = [
        (httpx.get(f"{url}/nope"), 404, "not_found"),
        (httpx.get(f"{url}/echo"), 405, "method_not_allowed"),
        (httpx.post(f"{url}/echo", content=b"teapot"), 418, "teapot"),
        (httpx.post(f"{url}/item", content=b"{"), 400, "bad_request"),
        (httpx.post(f"{url}/item", json={"n": "x"}), 400, "bad_request"),
        (httpx.get(f"{url}/boom"), 500, "internal"),
    ]
    for reply, status, reason in cases:
        assert reply.status_code == status
        assert reply.json()["reason"] == reason and reply.json()["error"]
    assert "secret" not in cases[-1][0].text


def test_bodies_over_the_limit_are_refused_and_the_connection_closed(service):
    url, _ = service
    big = httpx.post(f"{url}/echo", content=b"x" * (LIMIT_BYTES + 1))
    assert big.status_code == 413 and big.json()["reason"] == "body_too_large"
    assert big.headers["connection"] == "close"

    def chunks() -> Iterator[bytes]:  # no Content-Length: only the streaming count can stop it
        for _ in range(8):
            yield b"y" * 512

    streamed = httpx.post(f"{url}/echo", content=chunks())
    assert streamed.status_code == 413


def test_a_50_mb_declared_body_is_refused_before_it_is_sent(service):
    url, _ = service
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n"
    started = time.monotonic()
    reply = raw_exchange(url, head + b"z" * 65536)
    assert reply.startswith(b"HTTP/1.1 413 ") and b"body_too_large" in reply
    assert time.monotonic() - started < 2.0


def test_slowloris_headers_get_408_within_the_header_timeout(service):
    url, config = service
    started = time.monotonic()
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    reply = raw_exchange(url, head, trickle_s=0.05)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"header_timeout" in reply
    assert time.monotonic() - started < config.header_timeout_s + 1.5
    assert httpx.get(f"{url}/healthz").status_code == 200  # the server is still serving


def test_a_truncated_body_gets_408_not_a_hang(service):
    url, _ = service
    reply = raw_exchange(url, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    assert reply.startswith(b"HTTP/1.1 408 ") and b"body_timeout" in reply


@pytest.mark.parametrize(
    "head",
    [
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1e12\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
)
def test_malformed_http_gets_a_json_400(service, head):
    url, _ = service
    reply = raw_exchange(url, head)
    assert reply.startswith(b"HTTP/1.1 400 ") and b'"reason": "bad_http"' in reply


def test_headers_over_the_limit_are_refused():
    config = ServiceConfig(max_header_bytes=2048)
    server = serve(config)
    try:
        reply = httpx.get(f"{server.url}/healthz", headers={"x-big": "b" * 4096})
        assert reply.status_code == 431 and reply.json()["reason"] == "headers_too_large"
        trickled = raw_exchange(server.url, b"GET / HTTP/1.1\r\nx-big: " + b"b" * 4096)
        assert trickled.startswith(b"HTTP/1.1 400 ")  # h11's own bound on a head in pieces
    finally:
        server.stop()


def test_token_guards_everything_but_the_probes():
    config = ServiceConfig(token="s3cret")
    server = serve(config, ready=False)
    url, good = server.url, {"Authorization": "Bearer s3cret"}
    try:
        for path in ("/metrics", "/docs", "/openapi.json"):
            reply = httpx.get(f"{url}{path}", headers={"Authorization": "Bearer wrong"})
            assert reply.status_code == 401 and reply.json()["reason"] == "unauthorized"
            assert httpx.get(f"{url}{path}", headers=good).status_code == 200
        assert httpx.post(f"{url}/echo", content=b"a").status_code == 401
        assert httpx.get(f"{url}/healthz").status_code == 200
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 503 and ready.json()["reason"] == "not_ready"
    finally:
        server.stop()


def test_metrics_count_requests_errors_and_latency(service):
    url, _ = service
    httpx.post(f"{url}/echo", content=b"abc")
    httpx.get(f"{url}/nope/1")
    httpx.get(f"{url}/nope/2")
    text = httpx.get(f"{url}/metrics").text
    assert 'test_http_requests_total{route="/echo",status="200"} 1.0' in text
    assert 'test_http_requests_total{route="other",status="404"} 2.0' in text
    assert 'test_http_errors_total{reason="not_found",route="other"} 2.0' in text
    assert 'test_http_request_duration_seconds_count{route="/echo"} 1.0' in text


def test_config_checks_and_the_exposure_warning(tmp_path):
    assert ServiceConfig().exposure_warning() is None
    assert ServiceConfig(host="::1").exposure_warning() is None
    assert "without a bearer token" in (ServiceConfig(host="0.0.0.0").exposure_warning() or "")
    assert ServiceConfig(host="0.0.0.0", token="t").exposure_warning() is None
    with pytest.raises(HetschedError, match="both a certificate and a key"):
        ServiceConfig(tls_certfile=tmp_path / "c.pem")
    with pytest.raises(HetschedError, match="not found"):
        ServiceConfig(tls_certfile=tmp_path / "c.pem", tls_keyfile=tmp_path / "k.pem")
    with pytest.raises(HetschedError, match="positive"):
        ServiceConfig(body_timeout_s=0)
    for port in (-1, 65536, 99999):
        with pytest.raises(HetschedError, match=f"port {port} is not in 0-65535"):
            ServiceConfig(port=port)


def test_tls_files_that_do_not_load_are_a_one_line_error(tmp_path):
    cert, key, _ = issue(tmp_path, "server")
    other_cert, other_key, _ = issue(tmp_path, "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    for tls in ((garbage, garbage), (cert, other_key), (key, cert)):
        with pytest.raises(HetschedError, match="not a PEM certificate and its unencrypted"):
            ServiceConfig(tls_certfile=tls[0], tls_keyfile=tls[1])
    with pytest.raises(HetschedError, match="not a PEM CA bundle"):
        ServiceConfig(tls_certfile=cert, tls_keyfile=key, tls_client_ca=garbage)
    assert ServiceConfig(tls_certfile=other_cert, tls_keyfile=other_key).scheme == "https"


def issue(tmp_path: Path, name: str, issuer: tuple | None = None) -> tuple[Path, Path, tuple]:
    """A certificate for ``localhost`` (self-signed CA if no issuer); (cert, key, (cert, key))."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer_cert, signer_key = issuer if issuer else (None, key)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer_cert.subject if signer_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
        .sign(signer_key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path, (cert, key)


def test_tls_and_client_certificates(tmp_path):
    import ssl

    ca_path, _, ca = issue(tmp_path, "ca")
    server_cert, server_key, _ = issue(tmp_path, "server", ca)
    client_cert, client_key, _ = issue(tmp_path, "client", ca)
    config = ServiceConfig(tls_certfile=server_cert, tls_keyfile=server_key, tls_client_ca=ca_path)
    assert config.exposure_warning() is None
    server = serve(config)
    try:
        assert server.url.startswith("https://")
        url = f"https://localhost:{server.url.rsplit(':', 1)[1]}/healthz"
        context = ssl.create_default_context(cafile=str(ca_path))
        with pytest.raises(httpx.TransportError):  # no client certificate: the handshake fails
            httpx.get(url, verify=context)
        context.load_cert_chain(client_cert, client_key)
        assert httpx.get(url, verify=context).json() == {"status": "ok"}
    finally:
        server.stop()


class RecordingTransport:
    """The few transport calls CoalescingTransport makes, recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_writes_of_one_loop_step_leave_as_one_and_close_flushes_first():
    loop = asyncio.new_event_loop()
    try:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, loop)  # type: ignore[arg-type]

        async def respond() -> None:
            transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
            transport.write(b"body")
            transport.write(b"")
            assert inner.writes == []  # held until this step of the loop ends

        loop.run_until_complete(respond())
        loop.run_until_complete(asyncio.sleep(0))
        assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
        transport.write(b"408 and goodbye")
        transport.close()  # the error answer goes out before the connection closes
        assert inner.writes[-1] == b"408 and goodbye" and inner.closed
        transport.write(b"too late")
        loop.run_until_complete(asyncio.sleep(0))
        assert inner.writes[-1] == b"408 and goodbye"  # nothing is written once closed
        assert transport.get_extra_info("peername") == "info:peername"
    finally:
        loop.close()
