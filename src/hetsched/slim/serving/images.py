"""Turning request bodies into model inputs, with every limit checked and every failure named.

Two encodings are accepted, both giving float32 arrays of the model's input shape (C x H x W):

* **PNG/JPEG files** (``multipart/form-data``): decoded with Pillow, converted to RGB, resized to
  the model's input size, scaled to [0, 1] and normalised with the training data's per-channel
  mean and std (:class:`InputSpec`), exactly as the training images were.
* **Raw arrays** (``application/json``): already-normalised model inputs, either nested lists or
  ``{"b64": ..., "shape": [...], "dtype": "float32"|"uint8"}`` (base64 of the array's bytes,
  C order, little-endian); the shape must equal the model's input shape.

Every problem raises :class:`RequestError` with the HTTP status and a message that names the image
and what is wrong, so a client can fix its request without reading server logs.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetsched.core.web import ServiceError

IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG"}
"""Accepted file content types and the Pillow format each must decode as."""
ARRAY_DTYPES: dict[str, np.dtype[Any]] = {"float32": np.dtype("<f4"), "uint8": np.dtype("u1")}
MAX_DIMS = 8
"""Most dimensions a raw array may declare (the model takes 3)."""


class RequestError(ServiceError):
    """A request the server refuses; ``status`` is the HTTP status to answer with.

    The project's HTTP error (:class:`~hetsched.core.web.ServiceError`) plus when to retry; a 408
    closes the connection (the client stopped sending).

    Args:
        status: 4xx (client errors) or 429/503/504 (overload and deadlines).
        message: What is wrong, naming the image or field.
        reason: A short machine-readable cause (``queue_full``, ``bad_base64``, ...).
        retry_after_s: For 429/503: when a retry may succeed (the ``Retry-After`` header).
    """

    def __init__(
        self, status: int, message: str, reason: str, retry_after_s: float | None = None
    ) -> None:
        super().__init__(status, message, reason, close=status == 408)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class InputSpec:
    """What the served model takes: image size and channels, and the pixel normalisation."""

    channels: int
    image_size: int
    pixel_mean: tuple[float, ...]
    pixel_std: tuple[float, ...]
    class_names: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int, int]:
        """C x H x W of one model input."""
        return (self.channels, self.image_size, self.image_size)


def decode_image_file(
    data: bytes, content_type: str | None, spec: InputSpec, *, index: int, max_pixels: int
) -> np.ndarray:
    """One PNG/JPEG file as a normalised C x H x W float32 array.

    Raises:
        RequestError: 415 for another content type, 400 for bytes that do not decode as the
            declared format, 413 for an image with more than ``max_pixels`` pixels.
    """
    from PIL import Image

    expected = IMAGE_TYPES.get((content_type or "").split(";")[0].strip().lower())
    if expected is None:
        raise RequestError(
            415,
            f"image {index}: content type {content_type!r} is not accepted;"
            f" send {' or '.join(IMAGE_TYPES)}",
            "unsupported_image_type",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))
            if opened.format != expected:
                raise RequestError(
                    400,
                    f"image {index}: declared {content_type} but the bytes are"
                    f" {opened.format or 'not an image'}",
                    "image_type_mismatch",
                )
            if opened.width * opened.height > max_pixels:
                raise RequestError(
                    413,
                    f"image {index}: {opened.width}x{opened.height} pixels exceeds the limit of"
                    f" {max_pixels} pixels",
                    "image_too_large",
                )
            size = (spec.image_size, spec.image_size)
            image = opened.convert("RGB").resize(size, Image.Resampling.BILINEAR)
    except RequestError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise RequestError(
            413, f"image {index}: too many pixels to decode: {error}", "image_too_large"
        ) from None
    except Exception as error:  # Pillow raises many types for corrupt or hostile files
        raise RequestError(
            400, f"image {index}: not a decodable {expected}: {error}", "bad_image"
        ) from None
    pixels = np.asarray(image, dtype=np.uint8).transpose(2, 0, 1)
    if spec.channels == 1:
        pixels = pixels.mean(axis=0, keepdims=True)
    return normalise_pixels(pixels, spec)


def normalise_pixels(pixels: np.ndarray, spec: InputSpec) -> np.ndarray:
    """Pixels in [0, 255] (... x C x H x W) as the model's input: scaled to [0, 1] and
    normalised with the training data's per-channel mean and std, as the training images were."""
    mean = np.asarray(spec.pixel_mean, dtype=np.float32).reshape(-1, 1, 1)
    std = np.asarray(spec.pixel_std, dtype=np.float32).reshape(-1, 1, 1)
    scaled = np.asarray(pixels, dtype=np.float32) / 255.0
    return np.ascontiguousarray((scaled - mean) / std, dtype=np.float32)


def decode_array(item: Any, spec: InputSpec, *, index: int, max_bytes: int) -> np.ndarray:
    """One raw array (nested lists or a base64 object) as a C x H x W float32 array.

    Raises:
        RequestError: 400 for bad base64, an unknown dtype or a non-numeric list, 413 for more
            than ``max_bytes``, 422 for a shape other than the model's input shape.
    """
    if isinstance(item, dict):
        array = _decode_b64(item, index=index, max_bytes=max_bytes)
    elif isinstance(item, list):
        try:
            with np.errstate(over="ignore"):  # too-large numbers become inf: refused below
                array = np.asarray(item, dtype=np.float32)
        except (TypeError, ValueError, OverflowError, RecursionError):
            raise RequestError(
                400,
                f"image {index}: nested lists must hold numbers in a regular"
                f" {'x'.join(map(str, spec.shape))} grid",
                "bad_array",
            ) from None
        if array.nbytes > max_bytes:
            raise RequestError(
                413, f"image {index}: {array.nbytes} bytes exceeds {max_bytes}", "image_too_large"
            )
    else:
        raise RequestError(
            400,
            f"image {index}: expected a nested list or an object with 'b64', 'shape' and"
            f" 'dtype', got {type(item).__name__}",
            "bad_array",
        )
    if array.shape != spec.shape:
        raise RequestError(
            422,
            f"image {index}: shape {tuple(array.shape)} but the model takes {spec.shape}"
            " (C x H x W, normalised)",
            "wrong_shape",
        )
    if not np.isfinite(array).all():
        raise RequestError(422, f"image {index}: contains NaN or infinity", "not_finite")
    return np.ascontiguousarray(array, dtype=np.float32)


def _decode_b64(item: dict, *, index: int, max_bytes: int) -> np.ndarray:
    missing = [key for key in ("b64", "shape") if key not in item]
    if missing:
        raise RequestError(400, f"image {index}: missing field(s) {missing}", "bad_array")
    unknown = sorted(set(item) - {"b64", "shape", "dtype"})
    if unknown:
        raise RequestError(
            400,
            f"image {index}: unknown field(s) {unknown}; allowed: b64, shape, dtype",
            "bad_array",
        )
    dtype_name = item.get("dtype", "float32")
    if not isinstance(dtype_name, str) or dtype_name not in ARRAY_DTYPES:
        raise RequestError(
            400,
            f"image {index}: dtype {dtype_name!r} is not one of {sorted(ARRAY_DTYPES)}",
            "bad_dtype",
        )
    dtype = ARRAY_DTYPES[dtype_name]
    shape = item["shape"]
    if not (
        isinstance(shape, list)
        and 0 < len(shape) <= MAX_DIMS
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape)
    ):
        raise RequestError(
            400,
            f"image {index}: 'shape' must be a list of 1 to {MAX_DIMS} positive integers",
            "bad_array",
        )
    expected_bytes = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if expected_bytes > max_bytes:
        raise RequestError(
            413,
            f"image {index}: shape {shape} of {dtype_name} is {expected_bytes} bytes, more than"
            f" {max_bytes}",
            "image_too_large",
        )
    encoded = item["b64"]
    if not isinstance(encoded, str):
        raise RequestError(400, f"image {index}: 'b64' must be a string", "bad_base64")
    if len(encoded) > 4 * (max_bytes // 3 + 1):
        raise RequestError(
            413, f"image {index}: 'b64' decodes to more than {max_bytes} bytes", "image_too_large"
        )
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise RequestError(400, f"image {index}: invalid base64: {error}", "bad_base64") from None
    if len(raw) != expected_bytes:
        raise RequestError(
            422,
            f"image {index}: {len(raw)} bytes do not fill shape {tuple(shape)} of {dtype_name}"
            f" ({expected_bytes} bytes)",
            "wrong_shape",
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(np.float32)
