"""Reading a classify request's body into model inputs and options, with the CPU work off the loop.

The body is read with its size bounded (413 as soon as it passes the limit, whatever
Content-Length claimed; the time to read it is bounded by :mod:`.guard`). JSON parsing, array
decoding and PNG/JPEG decoding then run on a small thread pool (:class:`Decoder`), so one large or
slow-to-decode request never stalls the event loop that answers every other request, admission
refusals and probes included. Multipart framing is parsed on the loop (Starlette's parser is
asynchronous), bounded by the body limit and a cap on parts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from hetsched.slim.serving.config import AdmissionConfig
from hetsched.slim.serving.images import InputSpec, RequestError, decode_array, decode_image_file
from hetsched.slim.serving.options import (
    OPTION_NAMES,
    RequestOptions,
    options_from_json,
    options_from_text,
    parse_json,
)

T = TypeVar("T")
MEDIA_TYPES = ("multipart/form-data", "application/json")


@dataclass(frozen=True)
class ClassifyInputs:
    """One classify request, decoded: model inputs (C x H x W float32) and its options."""

    images: list[np.ndarray]
    options: RequestOptions


class Decoder:
    """A bounded pool of threads for the CPU work of decoding requests.

    Args:
        threads: Worker threads (Pillow and NumPy release the GIL for much of their work).
    """

    def __init__(self, threads: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="decode")

    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` on a decoding thread; its exception (a :class:`RequestError`) is re-raised."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    def close(self) -> None:
        """Stops the threads once their current work is done."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def media_type(request: Request) -> str:
    """The request's media type, lower case, without parameters ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The body; 413 as soon as it passes ``max_bytes``, whatever Content-Length says."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(
                413, f"body exceeds the limit of {max_bytes} bytes", "body_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def read_classify(
    request: Request, spec: InputSpec, limits: AdmissionConfig, decoder: Decoder
) -> ClassifyInputs:
    """The images and options of a ``POST /v1/classify``, by content type.

    Raises:
        RequestError: 415 for another content type; 400/413/422 naming what is wrong.
    """
    kind = media_type(request)
    if kind not in MEDIA_TYPES:
        raise RequestError(
            415,
            f"Content-Type {request.headers.get('content-type') or '(none)'!r} is not supported;"
            " send multipart/form-data with PNG/JPEG files in field 'image', or"
            " application/json with {'images': [...]} arrays",
            "unsupported_content_type",
        )
    body = await read_body(request, limits.max_body_bytes)
    if kind == "application/json":
        return await decoder.run(lambda: _json_inputs(body, spec, limits))
    files, fields = await _form_parts(request, body, limits)
    options = options_from_text(fields, "form")
    _check_count(len(files), limits.max_images_per_request)

    def decode_files() -> list[np.ndarray]:
        return [
            decode_image_file(data, file_type, spec, index=i, max_pixels=limits.max_image_pixels)
            for i, (data, file_type) in enumerate(files)
        ]

    return ClassifyInputs(await decoder.run(decode_files), options)


def _json_inputs(body: bytes, spec: InputSpec, limits: AdmissionConfig) -> ClassifyInputs:
    data = parse_json(body)
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise RequestError(400, "JSON body must be an object with a list 'images'", "bad_json")
    items = data.pop("images")
    options = options_from_json(data, "body")
    _check_count(len(items), limits.max_images_per_request)
    images = [
        decode_array(item, spec, index=i, max_bytes=limits.max_image_bytes)
        for i, item in enumerate(items)
    ]
    return ClassifyInputs(images, options)


async def _form_parts(
    request: Request, body: bytes, limits: AdmissionConfig
) -> tuple[list[tuple[bytes, str | None]], Mapping[str, str]]:
    """The uploaded files (bytes, content type) and the text fields of a multipart body."""

    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    parser = MultiPartParser(
        request.headers,
        stream(),
        max_files=limits.max_images_per_request + 1,
        max_fields=len(OPTION_NAMES) + 1,
        max_part_size=limits.max_image_bytes,
    )
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise RequestError(
            400, f"malformed multipart body: {error.message}", "bad_multipart"
        ) from None
    files: list[tuple[bytes, str | None]] = []
    fields: dict[str, str] = {}
    for name, value in form.multi_items():
        if name == "image" and isinstance(value, UploadFile):
            data = await value.read()
            if len(data) > limits.max_image_bytes:
                raise RequestError(
                    413,
                    f"image {len(files)}: {len(data)} bytes exceeds the limit of"
                    f" {limits.max_image_bytes}",
                    "image_too_large",
                )
            files.append((data, value.content_type))
        elif name in OPTION_NAMES and isinstance(value, str) and name not in fields:
            fields[name] = value
        else:
            what = "a file" if isinstance(value, UploadFile) else "a text field"
            raise RequestError(
                400,
                f"form field {name!r} ({what}) is not accepted: send files in 'image' and"
                f" options {', '.join(OPTION_NAMES)} once each",
                "bad_multipart",
            )
    return files, fields


def _check_count(count: int, limit: int) -> None:
    if count == 0:
        raise RequestError(400, "no images in the request", "no_images")
    if count > limit:
        raise RequestError(
            413, f"{count} images in one request exceeds the limit of {limit}", "too_many_images"
        )


def json_object(body: bytes, what: str) -> dict[str, Any]:
    """``body`` parsed as a JSON object.

    Raises:
        RequestError: 400 for invalid JSON or a value that is not an object.
    """
    data = parse_json(body)
    if not isinstance(data, dict):
        raise RequestError(400, f"{what} must be a JSON object", "bad_json")
    return data
