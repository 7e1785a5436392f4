"""Hypothesis strategies for hostile requests to the serving API, and the check every reply meets.

Shared by the CI fuzz test (a few hundred requests) and ``benchmarks/bench_serving_fuzz.py``
(tens of thousands). Requests are built near the API's real shapes (classify JSON and multipart
bodies, OIP inference requests, raw arrays, base64 items) with every field replaced at random by
any JSON value, huge or non-finite numbers, wrong types, unknown keys or raw bytes, so they reach
the handlers' deep paths instead of failing at the first check.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass

import httpx
from hypothesis import strategies as st
from PIL import Image

MODEL = "slimresnet"
SHAPE = [3, 8, 8]


def _valid_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


VALID_PNG = _valid_png()
PATH_CHARACTERS = "abcdefghijklmnopqrstuvwxyz/%._-0123456789"


@dataclass(frozen=True)
class FuzzRequest:
    """One request: method, path, headers, body bytes."""

    endpoint: str
    """Which endpoint family it targets (for per-endpoint counts)."""
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class BadReplyError(AssertionError):
    """A reply the API must never give (a 5xx, or an error without the project's body)."""


numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e-9, 4294967296, 2**63, 1e308]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=24).map(
    str.strip
)


def _grid(value: float) -> list:
    return [[[value] * SHAPE[2] for _ in range(SHAPE[1])] for _ in range(SHAPE[0])]


b64_items = st.builds(
    lambda b64, shape, dtype, extra: {"b64": b64, "shape": shape, "dtype": dtype} | extra,
    st.one_of(st.just("AAAA" * 48), st.text(max_size=16), json_values),
    st.one_of(st.just(SHAPE), st.lists(numbers, max_size=5), json_values),
    st.one_of(st.sampled_from(["float32", "uint8", "int64"]), json_values),
    st.one_of(
        st.just({}), st.just({}), st.dictionaries(st.text(max_size=6), json_values, max_size=1)
    ),
)
grids = numbers.filter(lambda x: not isinstance(x, int) or abs(x) < 2**60).map(_grid)
images = st.one_of(grids, b64_items, b64_items, json_values)
"""Mostly near-valid items (so later checks are reached), sometimes anything."""
any_options = st.dictionaries(
    st.one_of(st.sampled_from(["deadline_s", "top_k", "min_width"]), st.text(max_size=8)),
    json_values,
    max_size=3,
)
valid_options = st.fixed_dictionaries(
    {},
    optional={
        "deadline_s": st.floats(0.01, 100),
        "top_k": st.integers(1, 20),
        "min_width": st.sampled_from([0.25, 0.5, 1.0]),
    },
)
options = st.one_of(valid_options, valid_options, any_options)


def _json_body(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def _content_type(default: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(default),
        st.just(default),
        st.just(default),
        st.sampled_from(["application/json", "multipart/form-data; boundary=b", "text/plain"]),
        header_text,
    )


def _extra_headers() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(
        st.sampled_from(["X-Deadline-S", "Inference-Header-Content-Length", "X-Other"]),
        st.one_of(header_text, st.sampled_from(["0.5", "-1", "inf", "nan", "1e400", "7"])),
        max_size=2,
    )


def _rarely(draw: st.DrawFn) -> bool:
    """True one time in eight: for replacing a near-valid request by anything at all."""
    return draw(st.integers(0, 7)) == 0


@st.composite
def classify_json(draw: st.DrawFn) -> FuzzRequest:
    body: object = {"images": draw(st.lists(images, min_size=1, max_size=2))} | draw(options)
    if _rarely(draw):
        body = draw(json_values)
    raw = draw(st.binary(max_size=64)) if _rarely(draw) else _json_body(body)
    headers = {"Content-Type": draw(_content_type("application/json"))}
    return FuzzRequest("classify", "POST", "/v1/classify", headers | draw(_extra_headers()), raw)


def _part(name: str, data: bytes, content_type: str | None) -> bytes:
    disposition = f'form-data; name="{name}"'
    if content_type is not None:
        disposition += f'; filename="f"\r\nContent-Type: {content_type}'
    return f"--b\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"


@st.composite
def classify_multipart(draw: st.DrawFn) -> FuzzRequest:
    parts = [] if _rarely(draw) else [_part("image", VALID_PNG, "image/png")]
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(["image", "deadline_s", "top_k", "min_width", "x"]))
        data = draw(
            st.one_of(
                st.just(VALID_PNG),
                st.sampled_from([b"0.5", b"3", b"1.0"]),
                st.binary(max_size=48),
                _png_head(),
                st.text(max_size=8).map(str.encode),
            )
        )
        kind = draw(st.sampled_from([None, "image/png", "image/jpeg", "text/plain"]))
        parts.append(_part(name, data, kind))
    raw = b"".join(parts) + (b"" if _rarely(draw) else b"--b--\r\n")
    headers = {"Content-Type": draw(_content_type("multipart/form-data; boundary=b"))}
    return FuzzRequest("classify", "POST", "/v1/classify", headers | draw(_extra_headers()), raw)


@st.composite
def _png_head(draw: st.DrawFn) -> bytes:
    """A PNG signature and IHDR declaring any size (often far too large), without pixels."""
    width, height = draw(st.integers(0, 2**31 - 1)), draw(st.integers(0, 2**31 - 1))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + header + b"\0\0\0\0"


@st.composite
def infer(draw: st.DrawFn) -> FuzzRequest:
    tensor = {
        "name": draw(st.one_of(st.just("input"), json_values)),
        "shape": draw(st.one_of(st.just([1, *SHAPE]), st.lists(numbers, max_size=5), json_values)),
        "datatype": draw(
            st.one_of(st.sampled_from(["FP32", "UINT8", "INT8", "BYTES"]), json_values)
        ),
        "data": draw(st.one_of(st.just([0.5] * 192), st.lists(numbers, max_size=4), json_values)),
    } | draw(st.dictionaries(st.sampled_from(["parameters", "extra"]), json_values, max_size=1))
    body = {
        "inputs": [tensor] if not _rarely(draw) else draw(st.lists(st.just(tensor), max_size=2))
    }
    body |= draw(
        st.dictionaries(
            st.sampled_from(["parameters", "outputs", "id", "extra"]),
            st.one_of(json_values, options),
            max_size=2,
        )
    )
    raw = _json_body(draw(json_values) if _rarely(draw) else body)
    raw += draw(st.binary(max_size=32)) if _rarely(draw) else b""
    model = draw(st.one_of(st.just(MODEL), st.text("abc-._", min_size=1, max_size=8)))
    path = f"/v2/models/{model}/infer"
    headers = {"Content-Type": draw(_content_type("application/json"))}
    return FuzzRequest("infer", "POST", path, headers | draw(_extra_headers()), raw)


@st.composite
def other_routes(draw: st.DrawFn) -> FuzzRequest:
    path = draw(
        st.one_of(
            st.sampled_from(
                [
                    "/healthz", "/readyz", "/metrics", "/v2", "/v2/health/live",
                    "/v2/health/ready", f"/v2/models/{MODEL}", f"/v2/models/{MODEL}/ready",
                    f"/v2/models/{MODEL}/versions/7", "/v1/classify", "/docs", "/openapi.json",
                ]
            ),
            st.text(PATH_CHARACTERS, max_size=24).map(lambda p: "/" + p),
        )
    )  # fmt: skip
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]))
    body = draw(st.one_of(st.just(b""), st.binary(max_size=32)))
    return FuzzRequest("other", method, path, draw(_extra_headers()), body)


ENDPOINTS = {
    "classify-json": classify_json(),
    "classify-multipart": classify_multipart(),
    "infer": infer(),
    "other": other_routes(),
}


def send_and_check(client: httpx.Client, request: FuzzRequest) -> int:
    """Sends ``request``; returns the status after checking the reply.

    Raises:
        BadReplyError: For a 5xx (but 504 ``deadline_exceeded``: an accepted request whose own
            deadline passed) or an error reply without ``{"error", "reason"}``.
        httpx.TransportError: The connection dropped or hung (past the client's timeout).
    """
    response = client.request(
        request.method, request.path, headers=request.headers, content=request.body
    )
    if response.status_code == 504 and response.json().get("reason") == "deadline_exceeded":
        return 504  # a valid request whose own (fuzzed, tight) deadline passed while queued
    if response.status_code >= 500:
        raise BadReplyError(f"{response.status_code} for {request}: {response.text[:300]}")
    if response.status_code >= 400 and request.method != "HEAD":
        body = response.json()
        if not (isinstance(body, dict) and {"error", "reason"} <= set(body)):
            raise BadReplyError(f"error body without error/reason for {request}: {body}")
    return response.status_code
