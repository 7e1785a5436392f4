"""Request decoding: PNG/JPEG files and raw arrays, every limit and its message (no server)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from hetsched.slim.serving.images import InputSpec, RequestError, decode_array, decode_image_file

SPEC = InputSpec(3, 8, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), tuple("0123456789"))


def png(width=8, height=8, value=255, fmt="PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (value, value, value)).save(buffer, format=fmt)
    return buffer.getvalue()


def test_png_is_resized_and_normalised_like_the_training_images():
    array = decode_image_file(png(16, 16, 255), "image/png", SPEC, index=0, max_pixels=10_000)
    assert array.shape == (3, 8, 8) and array.dtype == np.float32
    np.testing.assert_allclose(array, (1.0 - 0.5) / 0.25)


def test_jpeg_is_accepted():
    array = decode_image_file(png(fmt="JPEG"), "image/jpeg", SPEC, index=0, max_pixels=100)
    assert array.shape == (3, 8, 8)


@pytest.mark.parametrize(
    ("data", "content_type", "status", "reason", "words"),
    [
        (png(), "image/gif", 415, "unsupported_image_type", "image/gif"),
        (png(fmt="JPEG"), "image/png", 400, "image_type_mismatch", "JPEG"),
        (b"not an image", "image/png", 400, "bad_image", "not a decodable PNG"),
        (png(200, 200), "image/png", 413, "image_too_large", "200x200"),
    ],
)
def test_bad_files_are_refused_with_a_reason(data, content_type, status, reason, words):
    with pytest.raises(RequestError) as caught:
        decode_image_file(data, content_type, SPEC, index=3, max_pixels=1000)
    assert (caught.value.status, caught.value.reason) == (status, reason)
    assert "image 3" in str(caught.value) and words in str(caught.value)


def test_arrays_as_lists_and_as_base64_decode_to_the_same_input():
    x = np.random.default_rng(0).normal(size=SPEC.shape).astype(np.float32)
    b64 = {"b64": base64.b64encode(x.tobytes()).decode(), "shape": list(x.shape)}
    np.testing.assert_array_equal(decode_array(x.tolist(), SPEC, index=0, max_bytes=10**6), x)
    np.testing.assert_array_equal(decode_array(b64, SPEC, index=0, max_bytes=10**6), x)


def b64_item(array: np.ndarray, **fields):
    return {"b64": base64.b64encode(array.tobytes()).decode(), "shape": list(array.shape), **fields}


@pytest.mark.parametrize(
    ("item", "status", "reason", "words"),
    [
        ({"b64": "@@not base64@@", "shape": [3, 8, 8]}, 400, "bad_base64", "invalid base64"),
        (b64_item(np.zeros((3, 16, 16), np.float32)), 422, "wrong_shape", "(3, 16, 16)"),
        (np.zeros((3, 4, 4)).tolist(), 422, "wrong_shape", "model takes (3, 8, 8)"),
        (b64_item(np.zeros((3, 8, 8), np.float64), shape=[3, 8, 8]), 422, "wrong_shape", "bytes"),
        (b64_item(np.zeros((3, 8, 8), np.float32), dtype="int64"), 400, "bad_dtype", "int64"),
        (b64_item(np.zeros((3, 400, 400), np.float32)), 413, "image_too_large", "more than"),
        ([["a"]], 400, "bad_array", "numbers"),
        ("pixels", 400, "bad_array", "got str"),
        (np.full((3, 8, 8), np.nan).tolist(), 422, "not_finite", "NaN"),
    ],
)
def test_bad_arrays_are_refused_with_a_reason(item, status, reason, words):
    with pytest.raises(RequestError) as caught:
        decode_array(item, SPEC, index=1, max_bytes=100_000)
    assert (caught.value.status, caught.value.reason) == (status, reason)
    assert "image 1" in str(caught.value) and words in str(caught.value)
