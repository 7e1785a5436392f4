"""The accuracy signals the cluster records for the reward and the tables (eq. 7's p̃_acc).

:class:`AccuracyOracle` is what the cluster asks; :class:`TableAccuracy` answers from an accuracy
table (the simulated world); the live world judges the model's real output instead
(:class:`OutputAccuracyOracle`, :class:`~hetsched.slim.live.cluster.LiveAccuracy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hetsched.slim.model.accuracy import AccuracyTable


class AccuracyOracle(Protocol):
    """Accuracy signals for the reward and the tables (see
    :mod:`hetsched.slim.experiments.router_experiment`)."""

    def prior(self, widths: Sequence[float]) -> float:
        """p̃_acc of a width prefix (nearest-neighbour lookup), in [0, 1]."""

    def correct(self, widths: Sequence[float], image_index: int) -> bool:
        """Whether image ``image_index`` is classified correctly by the full width tuple."""


@runtime_checkable
class OutputAccuracyOracle(AccuracyOracle, Protocol):
    """An oracle that judges the model's real output (live servers compute for real): with it,
    an image that carries a payload is correct when its last segment's output says so."""

    def correct_output(self, image_index: int, output: Any) -> bool:
        """Whether the last segment's ``output`` (class logits) names image ``image_index``'s
        label."""


class TableAccuracy:
    """Accuracy prior and per-image correctness from an accuracy table (the reward's p̃_acc).

    The prior of a width prefix is the table's nearest-neighbour lookup (the paper's fallback). For
    correctness, a measured table answers per image (a workload longer than the test split takes
    its images in turn again, so image i is test image i mod n); the paper's table has only top-1
    figures, so each
    image gets a fixed difficulty u ~ U(0, 1) and counts as correct when u < top-1 of its
    width tuple: an image right at a slim width stays right at a wider one, the fraction correct
    matches the table in expectation, and every policy run on a seed sees the same difficulties.
    """

    def __init__(self, table: AccuracyTable, difficulty: np.ndarray) -> None:
        self.table = table
        self._difficulty = difficulty.tolist()
        self._priors: dict[tuple[float, ...], float] = {}
        """Prior per width prefix, looked up once (at most 4 + 16 + 64 + 256 of them): the
        simulated cluster asks for one per segment completion."""

    def prior(self, widths: Sequence[float]) -> float:
        """The table's nearest-neighbour top-1 of the width prefix."""
        key = tuple(widths)
        prior = self._priors.get(key)
        if prior is None:
            prior = self._priors[key] = float(self.table.lookup(key))
        return prior

    def redraw_difficulty(self, first_image: int, rng: np.random.Generator) -> None:
        """New difficulties for images ``first_image`` on: a lookahead's copy of the cluster
        must not know which future images are hard (measured tables answer per test image and
        keep their answers)."""
        count = len(self._difficulty) - first_image
        if count > 0:
            self._difficulty[first_image:] = rng.random(count).tolist()

    def correct(self, widths: Sequence[float], image_index: int) -> bool:
        """The measured answer for the image, else its difficulty against the table's top-1."""
        test_images = self.table.num_images
        if test_images:
            image_index %= test_images
        measured = self.table.correct(tuple(widths), image_index)
        if measured is not None:
            return bool(measured)
        return bool(self._difficulty[image_index] < self.prior(widths))
