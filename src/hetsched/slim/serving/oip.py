"""The Open Inference Protocol (KServe v2 REST) beside ``/v1/classify``.

Routes: ``GET /v2`` (server metadata), ``GET /v2/health/live``, ``GET /v2/health/ready``,
``GET /v2/models/{name}`` (model metadata), ``GET /v2/models/{name}/ready`` and
``POST /v2/models/{name}/infer`` (also under ``/versions/1``). Any OIP client works unchanged,
Triton's included: tensors come as JSON ``data`` (flat or nested, row-major) or through the binary
data extension (``Inference-Header-Content-Length``; each input's ``binary_data_size``). Outputs
are always JSON ``data``, which OIP clients read whatever output format they asked for.

One input, ``input``, of shape ``[N, C, H, W]``: ``FP32`` already-normalised model inputs (as
``/v1/classify``'s raw arrays), or ``UINT8`` pixels in [0, 255] that the server normalises with
the training data's statistics (as it does PNG files). Outputs: ``probabilities`` (FP32
``[N, classes]``), ``label`` (INT64 ``[N]``) and ``widths`` (FP32 ``[N, segments]``, the width each
segment ran at). Request ``parameters`` may hold ``deadline_s`` and ``min_width`` (see
:class:`~.options.RequestOptions`) and the protocol's own ``binary_data_output``; anything else
is refused with 400, as are unknown fields anywhere in the request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from hetsched.core.config import validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.model.slimresnet import NUM_SEGMENTS
from hetsched.slim.serving.answers import gather_results, probabilities
from hetsched.slim.serving.config import AdmissionConfig
from hetsched.slim.serving.images import InputSpec, RequestError, normalise_pixels
from hetsched.slim.serving.options import (
    DEADLINE_HEADER,
    PositiveSeconds,
    WidthFraction,
    header_deadline_s,
)
from hetsched.slim.serving.request_body import Decoder, json_object, read_body
from hetsched.slim.serving.service import Service

INPUT_NAME = "input"
OUTPUT_NAMES = ("probabilities", "label", "widths")
MODEL_VERSION = "1"
HEADER_LENGTH = "inference-header-content-length"
DATATYPES: dict[str, np.dtype[Any]] = {"FP32": np.dtype("<f4"), "UINT8": np.dtype("u1")}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RequestParameters(_Strict):
    """Request-level ``parameters``: our options plus the binary extension's output switch."""

    deadline_s: PositiveSeconds | None = None
    min_width: WidthFraction | None = None
    binary_data_output: bool | None = None
    """Accepted and ignored: outputs are always JSON data, which every OIP client reads."""


class InputParameters(_Strict):
    binary_data_size: Annotated[int, Field(ge=0)] | None = None


class OutputParameters(_Strict):
    binary_data: bool | None = None
    """Accepted and ignored (outputs are JSON data)."""


class InferInput(_Strict):
    name: str
    shape: list[Annotated[int, Field(ge=0)]]
    datatype: str
    parameters: InputParameters | None = None
    data: list[Any] | None = None


class RequestedOutput(_Strict):
    name: str
    parameters: OutputParameters | None = None


class InferRequest(_Strict):
    """The inference request JSON object of the protocol (strict: unknown fields refused)."""

    id: str | None = None
    parameters: RequestParameters | None = None
    inputs: list[InferInput]
    outputs: list[RequestedOutput] | None = None


@dataclass(frozen=True)
class DecodedInfer:
    """An inference request, checked, and its input as model inputs (C x H x W float32)."""

    request: InferRequest
    images: list[np.ndarray]


def oip_router(service: Service, decoder: Decoder) -> APIRouter:
    """The v2 routes over ``service`` (decoding on ``decoder``'s threads)."""
    router = APIRouter()
    config = service.config

    def ready() -> bool:
        return service.front is not None and service.front.servers_up() > 0

    def known_model(name: str, version: str | None = None) -> None:
        if name != config.model_name or version not in (None, MODEL_VERSION):
            raise RequestError(
                404,
                f"model {name!r} version {version or 'any'} is not served; this server serves"
                f" {config.model_name!r} version {MODEL_VERSION}",
                "unknown_model",
            )

    @router.get("/v2")
    async def server_metadata() -> dict[str, Any]:
        return {"name": "hetsched-slim", "version": "1", "extensions": ["binary_tensor_data"]}

    @router.get("/v2/health/live")
    async def live() -> dict[str, bool]:
        return {"live": True}

    @router.get("/v2/health/ready")
    async def server_ready() -> JSONResponse:
        up = ready()
        return JSONResponse({"ready": up}, 200 if up else 503)

    @router.get("/v2/models/{name}")
    @router.get("/v2/models/{name}/versions/{version}")
    async def model_metadata(name: str, version: str | None = None) -> dict[str, Any]:
        known_model(name, version)
        spec = _spec(service)
        classes = len(spec.class_names)
        return {
            "name": name,
            "versions": [MODEL_VERSION],
            "platform": "pytorch",
            "inputs": [
                {"name": INPUT_NAME, "datatype": dtype, "shape": [-1, *spec.shape]}
                for dtype in DATATYPES
            ],
            "outputs": [
                {"name": "probabilities", "datatype": "FP32", "shape": [-1, classes]},
                {"name": "label", "datatype": "INT64", "shape": [-1]},
                {"name": "widths", "datatype": "FP32", "shape": [-1, NUM_SEGMENTS]},
            ],
        }

    @router.get("/v2/models/{name}/ready")
    @router.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None) -> JSONResponse:
        known_model(name, version)
        up = ready()
        return JSONResponse({"name": name, "ready": up}, 200 if up else 503)

    @router.post("/v2/models/{name}/infer")
    @router.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(request: Request, name: str, version: str | None = None) -> dict[str, Any]:
        known_model(name, version)
        front, spec = service.front, _spec(service)
        if front is None:
            raise RequestError(503, "the servers are still starting", "starting", 1.0)
        limits = config.admission
        header_length = request.headers.get(HEADER_LENGTH)
        body = await read_body(request, limits.max_body_bytes)
        decoded = await decoder.run(lambda: decode_infer(body, header_length, spec, limits))
        parameters = decoded.request.parameters or RequestParameters()
        deadline_s = parameters.deadline_s or header_deadline_s(
            request.headers.get(DEADLINE_HEADER)
        )
        futures = front.submit(
            decoded.images,
            deadline_s or limits.default_deadline_s,
            parameters.min_width,
        )
        results = await gather_results(futures)
        wanted = [o.name for o in decoded.request.outputs or []] or list(OUTPUT_NAMES)
        tensors = {
            "probabilities": ("FP32", np.stack([probabilities(r.logits) for r in results])),
            "label": ("INT64", np.asarray([int(np.argmax(r.logits)) for r in results])),
            "widths": ("FP32", np.asarray([r.widths for r in results], dtype=np.float32)),
        }
        answer: dict[str, Any] = {
            "model_name": name,
            "model_version": MODEL_VERSION,
            "outputs": [
                {
                    "name": output,
                    "datatype": tensors[output][0],
                    "shape": list(tensors[output][1].shape),
                    "data": tensors[output][1].ravel().tolist(),
                }
                for output in wanted
            ],
        }
        if decoded.request.id is not None:
            answer["id"] = decoded.request.id
        return answer

    return router


def _spec(service: Service) -> InputSpec:
    if service.input_spec is None:
        raise RequestError(503, "the servers are still starting", "starting", 1.0)
    return service.input_spec


def decode_infer(
    body: bytes, header_length: str | None, spec: InputSpec, limits: AdmissionConfig
) -> DecodedInfer:
    """Parses and checks an inference request (JSON, or JSON + binary tensors) into model inputs.

    Raises:
        RequestError: 400 for a malformed request, 413 for too many images, 422 for a tensor that
            does not fit the model.
    """
    json_end = _json_length(body, header_length)
    try:
        request = validate_config(json_object(body[:json_end], "request"), InferRequest, "request")
    except ConfigError as error:
        raise RequestError(400, str(error).replace("\n", "; "), "bad_request") from None
    if len(request.inputs) != 1 or request.inputs[0].name != INPUT_NAME:
        raise RequestError(
            400,
            f"expected exactly one input named {INPUT_NAME!r}, got"
            f" {[tensor.name for tensor in request.inputs]}",
            "bad_request",
        )
    unknown = [o.name for o in request.outputs or [] if o.name not in OUTPUT_NAMES]
    if unknown:
        raise RequestError(
            400, f"unknown output(s) {unknown}; this model has {list(OUTPUT_NAMES)}", "bad_request"
        )
    tensor = request.inputs[0]
    array = _tensor(tensor, body[json_end:], spec, limits)
    images = normalise_pixels(array, spec) if tensor.datatype == "UINT8" else array
    if not np.isfinite(images).all():
        raise RequestError(422, "input contains NaN or infinity", "not_finite")
    return DecodedInfer(
        request=request, images=list(np.ascontiguousarray(images, dtype=np.float32))
    )


def _json_length(body: bytes, header_length: str | None) -> int:
    if header_length is None:
        return len(body)
    if not header_length.isdigit() or int(header_length) > len(body):
        raise RequestError(
            400,
            f"Inference-Header-Content-Length {header_length!r} is not a length within the body"
            f" of {len(body)} bytes",
            "bad_request",
        )
    return int(header_length)


def _tensor(
    tensor: InferInput, binary: bytes, spec: InputSpec, limits: AdmissionConfig
) -> np.ndarray:
    """The input tensor as an array of shape [N, C, H, W] and the declared datatype."""
    dtype = DATATYPES.get(tensor.datatype)
    if dtype is None:
        raise RequestError(
            400,
            f"datatype {tensor.datatype!r} is not accepted; send one of {list(DATATYPES)}",
            "bad_datatype",
        )
    shape = tensor.shape
    if len(shape) != 4 or tuple(shape[1:]) != spec.shape:
        raise RequestError(
            422,
            f"input shape {shape} does not fit the model's [N, {', '.join(map(str, spec.shape))}]",
            "wrong_shape",
        )
    if not 1 <= shape[0] <= limits.max_images_per_request:
        raise RequestError(
            413 if shape[0] else 400,
            f"{shape[0]} images in one request; send 1 to {limits.max_images_per_request}",
            "too_many_images" if shape[0] else "no_images",
        )
    count = math.prod(shape)
    size = tensor.parameters.binary_data_size if tensor.parameters else None
    if (size is None) == (tensor.data is None):
        raise RequestError(
            400, "give the input's 'data' or its 'binary_data_size', exactly one", "bad_request"
        )
    if size is not None:
        if size != count * dtype.itemsize or size != len(binary):
            raise RequestError(
                400,
                f"binary_data_size {size} must equal the {len(binary)} bytes after the JSON"
                f" header and {count} x {dtype.itemsize} bytes of the shape",
                "bad_request",
            )
        return np.frombuffer(binary, dtype=dtype).reshape(shape)
    try:
        array = np.asarray(tensor.data, dtype=dtype)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise RequestError(
            400, f"'data' must hold {tensor.datatype} numbers in row-major order", "bad_array"
        ) from None
    if array.size != count:
        raise RequestError(
            422, f"'data' holds {array.size} values, the shape {shape} needs {count}", "wrong_shape"
        )
    return array.reshape(shape)
