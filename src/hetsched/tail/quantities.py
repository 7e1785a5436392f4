"""Kubernetes resource quantities ("500m", "1.5", "2k", "64Gi", "1e3") as numbers.

Parsed by the ``kubernetes`` client's own ``parse_quantity``, so a node's ``allocatable`` means
here what it means to the API server: "500m" is half a core, "2k" two thousand, "64Gi" 64·2^30
bytes. Node objects repeat a handful of distinct values, so parses are cached.
"""

from __future__ import annotations

import math
from functools import lru_cache

from kubernetes.utils.quantity import parse_quantity

from hetsched.core.errors import HetschedError

# Longer strings are not quantities anyone writes; refusing them bounds the parser's work.
MAX_QUANTITY_CHARS = 64


@lru_cache(maxsize=4096, typed=True)
def parse_quantity_value(quantity: str | int | float) -> float:
    """A quantity's value as a float; :class:`HetschedError` for anything malformed,
    negative or not finite."""
    if isinstance(quantity, bool) or (
        isinstance(quantity, str) and len(quantity) > MAX_QUANTITY_CHARS
    ):
        raise HetschedError(f"not a Kubernetes quantity: {str(quantity)[:MAX_QUANTITY_CHARS]!r}")
    try:
        value = float(parse_quantity(quantity))
    except (ValueError, TypeError, ArithmeticError):
        raise HetschedError(f"not a Kubernetes quantity: {quantity!r}") from None
    if not math.isfinite(value) or value < 0:
        raise HetschedError(f"quantity {quantity!r} is negative or not finite")
    return value


def parse_cpu_cores(quantity: str | int | float) -> float:
    """CPU cores of a quantity such as "500m" (0.5), "1.5" or "2"; must be positive."""
    cores = parse_quantity_value(quantity)
    if cores <= 0:
        raise HetschedError(f"CPU quantity {quantity!r} is not positive")
    return cores


def parse_memory_bytes(quantity: str | int | float) -> int:
    """Bytes of a memory quantity such as "64Gi", "512M" or "1e9" (rounded up, as Kubernetes
    rounds fractional bytes)."""
    return math.ceil(parse_quantity_value(quantity))
