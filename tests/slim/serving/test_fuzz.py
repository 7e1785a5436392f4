"""Generated hostile requests against the real HTTP stack over a fake serving system (no Ray):
no 5xx, every error with the project's body, no dropped connection, no hang.

A few hundred requests per run (derandomized: the same ones every run); the benchmark
``benchmarks/bench_serving_fuzz.py`` sends >= 10,000 per endpoint from the same strategies.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from hetsched.slim.serving.app import create_app
from hetsched.slim.serving.config import AdmissionConfig, HttpConfig, ServeConfig
from hetsched.slim.serving.http_server import BackgroundServer
from tests.slim.serving.fakes import FakeService
from tests.slim.serving.fuzz_requests import ENDPOINTS, FuzzRequest, send_and_check

EXAMPLES_PER_ENDPOINT = 100


@pytest.fixture(scope="module")
def client():
    config = ServeConfig(
        checkpoint=Path("unused.pt"),
        admission=AdmissionConfig(max_image_bytes=20_000, max_body_bytes=100_000),
        http=HttpConfig(header_timeout_s=5, body_timeout_s=5),
    )
    server = BackgroundServer(create_app(FakeService(config)), config.http)
    server.start()
    # One connection: a reply that drops it would fail the next request's send.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=server.url, timeout=10, limits=limits) as http:
        yield http
    server.stop()


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_fuzzed_requests_get_no_5xx_and_an_error_body(client, endpoint):
    statuses: Counter[int] = Counter()

    @settings(
        max_examples=EXAMPLES_PER_ENDPOINT,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(ENDPOINTS[endpoint])
    def check(request: FuzzRequest) -> None:
        statuses[send_and_check(client, request)] += 1

    check()
    assert sum(statuses.values()) >= EXAMPLES_PER_ENDPOINT
    assert any(status >= 400 for status in statuses)  # the strategies do reach the refusals
