"""Fuzzing the serving API at volume: >= 10,000 generated requests per endpoint family, plus
slowloris sockets; counts 5xx replies, dropped connections and hangs (target: 0, 0, 0).

Run from the repository root (it imports the tests' strategies):
``.venv/bin/python -m benchmarks.bench_serving_fuzz [--examples 10000] [--url URL --token T]``

Without ``--url`` the real HTTP stack (uvicorn with the project's protocol, guard, app, front and
admission) runs in this process over a fake serving system (no Ray, no model), which is what
the requests exercise: nothing malformed gets past decoding. The requests come from the CI fuzz
test's strategies (``tests/slim/serving/fuzz_requests.py``). A reply counts as a hang when it has
not come within 10 s.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from collections import Counter
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings

from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.config import AdmissionConfig, HttpConfig, ServeConfig
from hetsched.slim.serving.http_server import BackgroundServer
from tests.slim.serving.fakes import FakeService
from tests.slim.serving.fuzz_requests import ENDPOINTS, BadReplyError, FuzzRequest, send_and_check


def fuzz_endpoint(client: httpx.Client, endpoint: str, examples: int) -> dict:
    """``examples`` generated requests to one endpoint family; the tally of what came back."""
    tally: Counter[str] = Counter()
    first_failures: list[str] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(ENDPOINTS[endpoint])
    def one(request: FuzzRequest) -> None:
        try:
            tally[str(send_and_check(client, request))] += 1
        except BadReplyError as error:
            tally["bad reply (5xx or no error body)"] += 1
            first_failures.append(str(error)[:300])
        except httpx.TimeoutException:
            tally["hang"] += 1
        except httpx.TransportError as error:
            tally["dropped connection"] += 1
            first_failures.append(repr(error)[:300])

    started_s = time.perf_counter()
    one()
    return {
        "endpoint": endpoint,
        "requests": sum(tally.values()),
        "seconds": round(time.perf_counter() - started_s, 1),
        "statuses": dict(sorted(tally.items())),
        "failures": first_failures[:5],
    }


def slowloris(url: str, sockets: int, wait_s: float) -> dict:
    """``sockets`` connections that send half a request head; how many are still open after
    ``wait_s``."""
    host, port = url.removeprefix("http://").split(":")
    opened = []
    for _ in range(sockets):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n")
        opened.append(sock)
    time.sleep(wait_s)
    still_open = 0
    for sock in opened:
        sock.settimeout(0.1)
        try:
            still_open += sock.recv(1) != b""  # b"": closed by the server
        except TimeoutError:
            still_open += 1
        except OSError:
            pass  # reset: closed
        sock.close()
    return {"slowloris_sockets": sockets, "open_after_s": wait_s, "still_open": still_open}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="per endpoint family")
    parser.add_argument("--url", help="a running server (default: one in this process)")
    parser.add_argument("--token")
    parser.add_argument("--out", type=Path, default=Path("runs/slim-serving/fuzz.json"))
    args = parser.parse_args()
    server = None
    http = HttpConfig(header_timeout_s=5, body_timeout_s=5)
    url = args.url
    if url is None:
        config = ServeConfig(
            checkpoint=Path("unused.pt"),
            admission=AdmissionConfig(max_image_bytes=20_000, max_body_bytes=100_000),
            http=http,
        )
        server = BackgroundServer(create_app(FakeService(config)), http)
        url = server.url = server.start()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    rows = []
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=10, limits=limits) as client:
            for endpoint in ENDPOINTS:
                rows.append(fuzz_endpoint(client, endpoint, args.examples))
                print(json.dumps(rows[-1]), flush=True)
        rows.append(slowloris(url, 40, http.header_timeout_s + 2))
        print(json.dumps(rows[-1]), flush=True)
    finally:
        if server is not None:
            server.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
