"""Accuracy table of SlimResNet: top-1 for every per-segment width tuple, and the router's prior.

The router's reward (paper eq. 7) needs p_acc, the accuracy to expect from the widths a request has
run so far. :meth:`AccuracyTable.measure` evaluates all 4^4 = 256 width tuples on a test split and
keeps each image's correctness, so a simulator can use the real outcome of a real test image.
:meth:`AccuracyTable.paper` holds the paper's Tables I (uniform widths) and II (four mixed tuples)
for reproduction runs; it has top-1 figures only.

Lookup (the paper's nearest-neighbour fallback): a prefix (w_1..w_k), k = 1..4, is compared with
the first k widths of every measured tuple by L1 distance, sum_i |w_i - t_i|; the prior is the mean
top-1 of all measured tuples at the smallest distance. For a complete measured table this is the
mean over the prefix's completions; for the paper's table it is the nearest published tuple(s).
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, WIDTHS, SlimResNet

WidthTuple = tuple[float, ...]

PAPER_TABLE_I: dict[WidthTuple, float] = {
    (0.25,) * 4: 0.7030,
    (0.5,) * 4: 0.7299,
    (0.75,) * 4: 0.7493,
    (1.0,) * 4: 0.7643,
}
"""Table I: top-1 (fraction) on CIFAR-100 with every segment at the same width."""
PAPER_TABLE_II: dict[WidthTuple, float] = {
    (1.0, 0.75, 0.5, 0.25): 0.7135,
    (0.75, 1.0, 0.25, 0.5): 0.7233,
    (0.5, 0.25, 1.0, 0.75): 0.7453,
    (0.25, 0.5, 0.75, 1.0): 0.7533,
}
"""Table II: top-1 (fraction) on CIFAR-100 for four mixed width tuples."""


class AccuracyTable:
    """Top-1 per width tuple, with per-image correctness when measured.

    Args:
        top1: Measured top-1 (fraction) per width tuple (any subset of the 256).
        correct: Per tuple, a bool array over the test images (measured tables only).
        widths: The width choices per segment.
        source: Where the numbers come from (``paper`` or the checkpoint / data measured).
    """

    def __init__(
        self,
        top1: dict[WidthTuple, float],
        correct: dict[WidthTuple, np.ndarray] | None = None,
        widths: Sequence[float] = WIDTHS,
        source: str = "",
    ) -> None:
        if not top1:
            raise ValueError("an accuracy table needs at least one measured tuple")
        self.widths = tuple(float(w) for w in widths)
        self.source = source
        self._top1 = {tuple(float(w) for w in t): float(a) for t, a in top1.items()}
        self._correct = {
            tuple(float(w) for w in t): np.asarray(c, bool) for t, c in (correct or {}).items()
        }
        self._measured = np.array(list(self._top1), dtype=float)
        self._measured_top1 = np.array(list(self._top1.values()))

    @classmethod
    def paper(cls) -> AccuracyTable:
        """The paper's Tables I and II; other tuples are filled by nearest-neighbour lookup."""
        return cls({**PAPER_TABLE_I, **PAPER_TABLE_II}, source="paper")

    @classmethod
    def measure(
        cls,
        model: SlimResNet,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int = 128,
        source: str = "",
        on_batch: Callable[[int], None] | None = None,
    ) -> AccuracyTable:
        """Evaluates every width tuple of ``model`` on a split (see :func:`tuple_correctness`)."""
        correct = tuple_correctness(model, images, labels, batch_size, on_batch)
        top1 = {t: float(c.mean()) if len(c) else 0.0 for t, c in correct.items()}
        return cls(top1, correct, model.widths, source)

    def tuples(self) -> list[WidthTuple]:
        """All width tuples (4^4 = 256 for four widths), in lexicographic order."""
        return list(itertools.product(self.widths, repeat=NUM_SEGMENTS))

    def is_measured(self, widths: Sequence[float]) -> bool:
        return tuple(float(w) for w in widths) in self._top1

    def top1(self, widths: Sequence[float]) -> float:
        """Top-1 of a full width tuple: measured, or the nearest-neighbour fill."""
        if len(widths) != NUM_SEGMENTS:
            raise ValueError(f"top1 needs {NUM_SEGMENTS} widths, got {tuple(widths)}")
        measured = self._top1.get(tuple(float(w) for w in widths))
        return self.lookup(widths) if measured is None else measured

    def lookup(self, prefix: Sequence[float]) -> float:
        """Accuracy prior of a prefix of 1..4 widths (nearest neighbour; see the module doc)."""
        k = len(prefix)
        if not 1 <= k <= NUM_SEGMENTS:
            raise ValueError(f"a prefix has 1 to {NUM_SEGMENTS} widths, got {tuple(prefix)}")
        distance = np.abs(self._measured[:, :k] - np.asarray(prefix, dtype=float)).sum(axis=1)
        nearest = distance <= distance.min() + 1e-9
        return float(self._measured_top1[nearest].mean())

    def correct(self, widths: Sequence[float], image_index: int) -> bool | None:
        """Whether test image ``image_index`` is classified right at ``widths``; None if unknown."""
        answers = self._correct.get(tuple(float(w) for w in widths))
        if answers is None or not 0 <= image_index < len(answers):
            return None
        return bool(answers[image_index])

    @property
    def num_images(self) -> int | None:
        """Test images behind the per-image answers (None for a table of figures only)."""
        return len(next(iter(self._correct.values()))) if self._correct else None

    def to_json(self, path: Path) -> None:
        """Writes ``accuracy_table.json``: one entry per tuple, correctness as packed bits."""
        entries = []
        for t, top1 in self._top1.items():
            entry: dict = {"widths": list(t), "top1": top1}
            if t in self._correct:
                bits = np.packbits(self._correct[t].astype(np.uint8))
                entry["correct"] = base64.b64encode(bits.tobytes()).decode("ascii")
            entries.append(entry)
        data = {
            "source": self.source,
            "widths": list(self.widths),
            "num_images": self.num_images,
            "entries": entries,
        }
        Path(path).write_text(json.dumps(data, indent=1))

    @classmethod
    def from_json(cls, path: Path) -> AccuracyTable:
        """Reads a table written by :meth:`to_json`.

        Raises:
            DataError: If the file is missing, not JSON, or an entry is malformed.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError("accuracy table not found", path=str(path)) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(
                f"accuracy table is not readable JSON: {error}", path=str(path)
            ) from None
        try:
            widths = tuple(float(w) for w in data["widths"])
            num_images = data["num_images"]
            top1, correct = {}, {}
            for entry in data["entries"]:
                t = tuple(float(w) for w in entry["widths"])
                if len(t) != NUM_SEGMENTS or not set(t) <= set(widths):
                    raise ValueError(f"bad width tuple {t}")
                if not 0.0 <= float(entry["top1"]) <= 1.0:
                    raise ValueError(f"top1 {entry['top1']} of {t} is not a fraction")
                top1[t] = float(entry["top1"])
                if "correct" in entry:
                    bits = np.frombuffer(base64.b64decode(entry["correct"]), dtype=np.uint8)
                    correct[t] = np.unpackbits(bits)[:num_images].astype(bool)
                    if len(correct[t]) != num_images:
                        raise ValueError(f"correctness of {t} does not cover {num_images} images")
            return cls(top1, correct, widths, str(data.get("source", path)))
        except KeyError as error:
            raise DataError(
                "accuracy table lacks a field", path=str(path), field=str(error)
            ) from None
        except (TypeError, ValueError, AttributeError) as error:
            raise DataError(f"malformed accuracy table: {error}", path=str(path)) from None


def load_accuracy_table(name_or_path: str | Path) -> AccuracyTable:
    """``paper`` (Tables I/II) or the path of an ``accuracy_table.json``."""
    if str(name_or_path) == "paper":
        return AccuracyTable.paper()
    return AccuracyTable.from_json(Path(name_or_path))


@torch.no_grad()
def tuple_correctness(
    model: SlimResNet,
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
) -> dict[WidthTuple, np.ndarray]:
    """Per-image correctness of every width tuple.

    The 256 tuples share prefixes, so each batch walks the tree of prefixes depth first: segment
    k runs once per distinct prefix (4 + 16 + 64 + 256 segment runs instead of 4 x 256), and only
    one activation per depth is alive at a time.
    """
    model.eval()
    device = next(model.parameters()).device
    found: dict[WidthTuple, list[torch.Tensor]] = {}

    def descend(x: torch.Tensor, prefix: WidthTuple, y: torch.Tensor) -> None:
        for width in model.widths:
            out = model.segment(len(prefix), width)(x)
            if len(prefix) == NUM_SEGMENTS - 1:
                found.setdefault((*prefix, width), []).append((out.argmax(1) == y).cpu())
            else:
                descend(out, (*prefix, width), y)

    for start in range(0, len(labels), batch_size):
        x = images[start : start + batch_size].to(device)
        descend(x, (), labels[start : start + batch_size].to(device))
        if on_batch:
            on_batch(len(x))
    return {t: torch.cat(parts).numpy() for t, parts in found.items()}
