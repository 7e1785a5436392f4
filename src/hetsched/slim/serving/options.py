"""Per-request options (deadline, top-k, minimum width) and JSON bodies, parsed strictly.

A request's options may come from a JSON body (typed values), a form or a header (strings). Both
go through one pydantic model, so ``deadline_s: true``, ``Infinity``, ``NaN``, a negative number or
an unknown key are refused with 400 and the field named, the same way wherever they came from.
JSON bodies are parsed with the non-standard constants (``NaN``, ``Infinity``) refused and deep
nesting caught, so no hostile body reaches the handlers as anything but a 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, NoReturn

from pydantic import ConfigDict, Field

from hetsched.core.config import StrictModel, validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.serving.images import RequestError

DEADLINE_HEADER = "x-deadline-s"
"""Header carrying the request's deadline (seconds from arrival), read before the body."""

PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
WidthFraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class RequestOptions(StrictModel):
    """What a client may ask of one request, beyond its images."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    deadline_s: PositiveSeconds | None = None
    """Seconds from admission (once the request's body is read and decoded) by which every
    image must be answered; 504 at that moment otherwise, whether it waits or is running."""
    top_k: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Scores returned per image."""
    min_width: WidthFraction | None = None
    """No segment of these images runs narrower (an accuracy floor)."""


class _TextOptions(RequestOptions):
    """The same options given as strings (form fields, headers): numbers are parsed from text."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


OPTION_NAMES = tuple(RequestOptions.model_fields)


def options_from_json(values: Mapping[str, Any], source: str) -> RequestOptions:
    """Options from a parsed JSON object (typed: ``"0.5"`` and ``true`` are not numbers).

    Raises:
        RequestError: 400 naming ``source`` and each bad or unknown field.
    """
    try:
        return validate_config(dict(values), RequestOptions, source)
    except ConfigError as error:
        _bad_request(error)


def options_from_text(values: Mapping[str, str], source: str) -> RequestOptions:
    """Options from strings (form fields, a header): ``"0.5"`` is a number, ``"inf"`` is not.

    Raises:
        RequestError: 400 naming ``source`` and each bad or unknown field.
    """
    try:
        return validate_config(dict(values), _TextOptions, source)
    except ConfigError as error:
        _bad_request(error)


def header_deadline_s(value: str | None) -> float | None:
    """The ``X-Deadline-S`` header as seconds, or None when absent.

    Raises:
        RequestError: 400 for a value that is not a finite number > 0.
    """
    if value is None:
        return None
    return options_from_text({"deadline_s": value}, "header X-Deadline-S").deadline_s


def parse_json(body: bytes) -> Any:
    """The JSON value of ``body``; NaN/Infinity literals and deep nesting are refused.

    Raises:
        RequestError: 400 for anything that is not strict JSON.
    """
    try:
        return json.loads(body, parse_constant=_refuse_constant)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as error:
        raise RequestError(400, f"body is not valid JSON: {error}", "bad_json") from None
    except RecursionError:
        raise RequestError(400, "body is not valid JSON: nested too deeply", "bad_json") from None


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _bad_request(error: ConfigError) -> NoReturn:
    raise RequestError(400, str(error).replace("\n", "; "), "bad_option") from None
