"""Exponential backoff with seeded jitter, for the scheduler loop's retries.

A retry after the ``attempt``-th failure (0-based) waits ``cap = min(max_s, initial_s · 2^attempt)``
halved plus a uniform share of the other half ("equal jitter": ``cap/2 + U(0, cap/2)``), so the
wait still grows but many pods or scheduler replicas that failed together do not all retry in the
same instant. The jitter comes from a ``random.Random(seed)``: a run is reproducible per seed.
"""

from __future__ import annotations

import random

from hetsched.core.errors import HetschedError


class Backoff:
    """Waits between retries: :meth:`delay_s` of the attempt number."""

    def __init__(self, initial_s: float, max_s: float, seed: int) -> None:
        if not 0 < initial_s <= max_s:
            raise HetschedError(f"backoff needs 0 < initial ({initial_s}) <= max ({max_s})")
        self.initial_s, self.max_s = initial_s, max_s
        self._rng = random.Random(seed)

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait after failure number ``attempt`` (0 for the first)."""
        cap = min(self.max_s, self.initial_s * 2.0 ** min(attempt, 62))
        return cap / 2 + self._rng.uniform(0.0, cap / 2)
