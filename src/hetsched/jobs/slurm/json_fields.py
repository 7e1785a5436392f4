"""Readers of single values in Slurm's JSON, which is untrusted input.

Why a module of its own: what ``squeue --json`` prints is shaped partly by any cluster user (job
names, comments, partitions asked for) and partly by a Slurm version nobody tested here. One odd
value must cost its own record, never the whole scan. Each reader accepts only the JSON type it
expects, refuses booleans posing as numbers, NaN, infinities and values outside a stated range,
and raises :class:`~hetsched.core.errors.DataError` naming the field, so that the caller can skip
that one record and count it.
"""

from __future__ import annotations

import math
from typing import Any

from hetsched.core.errors import DataError

#: Slurm's 32-bit "no value" and "infinite" markers (``NO_VAL`` and ``INFINITE``).
SLURM_NO_VAL = 4_294_967_294
SLURM_INFINITE = 4_294_967_295
#: Largest Unix time accepted (year ~36,800): anything above is not a time.
MAX_UNIX_TIME_S = 2.0**40
#: Longest text field kept (names, users, partitions, states, gres strings).
MAX_TEXT_CHARS = 1024


def required(record: dict[str, Any], name: str, what: str) -> Any:
    """``record[name]``, or a DataError naming the missing field."""
    if name not in record:
        raise DataError(f"{what} has no {name!r} (is this Slurm 22.05's JSON?)", field=name)
    return record[name]


def whole_number(value: Any, name: str, what: str, lowest: int = 0, highest: int = 2**32) -> int:
    """An integer in ``[lowest, highest]``: a JSON integer, or a float with an integral value.

    Raises:
        DataError: For booleans, strings, NaN, infinities, fractions or values out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{what}: {name} is not a number ({type(value).__name__})", field=name)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise DataError(f"{what}: {name} is not a whole number ({value!r})", field=name)
    number = int(value)
    if not lowest <= number <= highest:
        raise DataError(f"{what}: {name} = {number} is outside [{lowest}, {highest}]", field=name)
    return number


def unix_time_s(value: Any, name: str, what: str) -> float:
    """A Unix time in seconds (0 = unset), finite and not absurdly large."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{what}: {name} is not a finite number ({value!r:.40})", field=name)
    if not 0 <= value <= MAX_UNIX_TIME_S:
        raise DataError(f"{what}: {name} = {value!r} is not a Unix time", field=name)
    return float(value)


def text(value: Any, name: str, what: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A JSON string of at most ``max_chars`` characters (None reads as the empty string)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{what}: {name} is not a string ({type(value).__name__})", field=name)
    if len(value) > max_chars:
        raise DataError(f"{what}: {name} is longer than {max_chars} characters", field=name)
    return value


def text_list(value: Any, name: str, what: str) -> tuple[str, ...]:
    """A JSON list of strings (None reads as empty)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DataError(f"{what}: {name} is not a list ({type(value).__name__})", field=name)
    return tuple(text(item, name, what) for item in value)


def loggable(value: str, max_chars: int = 40) -> str:
    """A short, ASCII-only rendering of untrusted text for one log line (no control characters,
    no terminal escapes, no multi-kB lines)."""
    shown = ascii(value[:max_chars])
    return shown + ("..." if len(value) > max_chars else "")
