"""From the front's per-image futures to what a client reads, shared by both APIs (v1 and OIP).

A request is answered only when all its images are: if any failed, the request fails with the
first failure's status and reason and says how many of its images failed, so a client never gets
a partial answer it might mistake for a whole one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.jobs import ImageResult


async def gather_results(futures: Sequence[asyncio.Future[ImageResult]]) -> list[ImageResult]:
    """Every image's result, in order.

    Raises:
        RequestError: The first failed image's error, naming how many failed.
    """
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    results = [o for o in outcomes if isinstance(o, ImageResult)]
    if len(results) == len(outcomes):
        return results
    index, first = next((i, o) for i, o in enumerate(outcomes) if not isinstance(o, ImageResult))
    if not isinstance(first, RequestError):
        raise first
    failed = len(outcomes) - len(results)
    raise RequestError(
        first.status,
        f"{failed} of {len(outcomes)} image(s) failed; image {index}: {first}",
        first.reason,
        first.retry_after_s,
    )


def probabilities(logits: np.ndarray) -> np.ndarray:
    """Softmax of one image's logits, in float64 (stable: the largest logit is subtracted)."""
    values = np.asarray(logits, dtype=np.float64)
    scores = np.exp(values - values.max())
    return scores / scores.sum()


def classify_json(result: ImageResult, class_names: Sequence[str], top_k: int) -> dict[str, Any]:
    """One image's answer in ``/v1/classify``: label, top-k scores, widths, servers, timings."""
    scores = probabilities(result.logits)
    order = np.argsort(-scores)[: min(top_k, len(scores))]
    return {
        "label": int(order[0]),
        "class_name": class_names[int(order[0])],
        "top_k": [{"label": int(i), "score": float(scores[i])} for i in order],
        "widths": list(result.widths),
        "servers": list(result.servers),
        "latency_s": result.latency_s,
        "queue_s": result.queue_s,
        "compute_s": result.compute_s,
        "reroutes": result.reroutes,
    }
