"""Fuzzing /filter and /prioritize over HTTP: every answer is a 200 of the right shape or a 4xx
with the JSON error schema; no 5xx, no dropped connection, no hang, and the server survives.

CI runs 100 examples per verb (200 requests); ``benchmarks/bench_tail_extender.py
--fuzz-examples 10000`` runs this file with ``HETSCHED_FUZZ_EXAMPLES=10000`` and prints the counts.
About a third of the generated bodies are valid ExtenderArgs (so the scoring paths run too).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.core.web import ServiceConfig
from hetsched.core.web_server import ServiceServer
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import SHARE_WITHIN, Extender
from hetsched.tail.extender_app import create_extender_app
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.scoring import P90Scorer
from hetsched.tail.telemetry import NodeTelemetry

EXAMPLES = int(os.environ.get("HETSCHED_FUZZ_EXAMPLES", "100"))
TIMEOUT_S = 10.0
KNOWN_NODES = [f"node{i}" for i in range(8)]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
quantities = (
    st.sampled_from(["500m", "1.5", "2", "1e3", "2k", "64Gi", "-1", "0", "1e999", "abc", ""])
    | st.text(max_size=70)
    | st.integers()
    | st.floats(allow_nan=False)
)
texts = st.text(max_size=80)
models = st.sampled_from([*default_catalog().model_keys(), "http://x/m.pt", "/etc/passwd"]) | texts
slos = st.sampled_from(["0.001", "50", "1e9", "-3", "nan", "inf", "fast"]) | texts
names = st.sampled_from(KNOWN_NODES) | texts


def maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """The field as the schema wants it (mostly), junk, or absent (None: dropped by present)."""
    return st.integers(0, 9).flatmap(
        lambda i: strategy if i < 8 else (json_values if i == 8 else st.just(None))
    )


def present(fields: dict) -> dict:
    """The fields that were drawn (None stands for "absent")."""
    return {k: v for k, v in fields.items() if v is not None}


@st.composite
def nodes(draw: st.DrawFn) -> object:
    labels = draw(
        maybe(
            st.dictionaries(texts, texts, max_size=2)
            | st.fixed_dictionaries(
                {
                    "hetsched.io/cpu-freq-ghz": st.sampled_from(["2.3", "0", "-1", "abc", "1e9"])
                    | texts
                }
            )
        )
    )
    metadata = present({"name": draw(maybe(names)), "labels": labels})
    status = present({"allocatable": draw(maybe(st.fixed_dictionaries({"cpu": quantities})))})
    return draw(st.sampled_from([{"metadata": metadata, "status": status}, {"metadata": metadata}]))


@st.composite
def extender_args(draw: st.DrawFn) -> object:
    annotations = present(
        {
            "hetsched.io/model": draw(maybe(models)),
            "hetsched.io/p90-slo-ms": draw(maybe(slos)),
            "hetsched.io/input-shape": draw(maybe(st.sampled_from(["1,3,224,224", "x", ""]))),
        }
    )
    metadata = present({"name": draw(maybe(texts)), "annotations": annotations})
    pod = draw(maybe(st.just({"metadata": metadata})))
    args: dict = present({"Pod": pod})
    if draw(st.booleans()):
        args["Nodes"] = draw(maybe(st.fixed_dictionaries({"items": st.lists(nodes(), max_size=6)})))
    else:
        args["NodeNames"] = draw(maybe(st.lists(names, max_size=8)))
    return args


structured = extender_args().map(lambda a: json.dumps(a).encode())
bodies = st.one_of(
    structured,
    structured,
    structured,
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=300),
)


@pytest.fixture(scope="module")
def extender_url(fitted):
    telemetry = NodeTelemetry(ttl_s=3600.0)
    telemetry.update(
        NodeCapacity(n, 2 + i, 2.3, 0.1 * i, 0.1 * i) for i, n in enumerate(KNOWN_NODES)
    )
    extender = Extender(P90Scorer(fitted, share_within=SHARE_WITHIN), default_catalog(), telemetry)
    config = ServiceConfig()
    server = ServiceServer(create_extender_app(extender, config), config)
    url = server.start()
    yield url
    assert httpx.get(f"{url}/healthz").status_code == 200  # the process survived
    server.stop()


def check_reply(verb: str, body: bytes, reply: httpx.Response) -> str:
    """The outcome class of one reply; fails the test on anything but 200 or 4xx-with-schema."""
    assert reply.status_code < 500, (reply.status_code, body[:200], reply.text[:200])
    if reply.status_code != 200:
        error = reply.json()
        assert set(error) == {"error", "reason"} and reply.status_code in (400, 413)
        return "4xx"
    payload = reply.json()
    if verb == "prioritize":
        assert all(0 <= h["Score"] <= 10 and isinstance(h["Host"], str) for h in payload)
    else:
        assert set(payload) == {
            "Nodes",
            "NodeNames",
            "FailedNodes",
            "FailedAndUnresolvableNodes",
            "Error",
        }
    return "200"


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_fuzzed_requests_get_200_or_4xx_never_5xx_drops_or_hangs(extender_url, verb):
    outcomes: Counter[str] = Counter()
    client = httpx.Client(timeout=TIMEOUT_S)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=bodies)
    def one_request(body: bytes) -> None:
        try:
            reply = client.post(f"{extender_url}/{verb}", content=body)
        except httpx.TimeoutException:
            outcomes["hang"] += 1
            raise
        except httpx.TransportError:
            outcomes["dropped"] += 1
            raise
        outcomes[check_reply(verb, body, reply)] += 1

    try:
        one_request()
    finally:
        client.close()
        print(f"\n{verb}: {sum(outcomes.values())} requests, {dict(outcomes)}")
    assert outcomes["hang"] == outcomes["dropped"] == 0
