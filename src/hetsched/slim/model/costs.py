"""Analytic costs of every (segment, width, previous width) of SlimResNet, in float32.

The executor's CANLOAD check (VRAM budget M_max) and the simulated devices need, for each queue key
(segment, w_req, w_prev), how many bytes of weights an instance holds, how many bytes an image's
activation occupies on the way in and out, and how many FLOPs one image costs. These follow from the
architecture alone (:mod:`hetsched.slim.model.slimresnet`), so they are computed from its constants
rather than measured; a test checks the FLOPs against
``torch.utils.flop_counter.FlopCounterMode`` and the parameter bytes against the modules.

Conventions: FLOPs count convolutions and the classifier as 2 x multiply-accumulates (the
convention of ``FlopCounterMode``); GroupNorm, ReLU, residual additions and pooling are left out
(well under 1 % of the total). Activation bytes are the segment's output per image (what moves to
the next segment's server); input bytes are the activation it consumes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from hetsched.core.errors import DataError
from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import (
    BLOCKS_PER_STAGE,
    INPUT_WIDTH,
    NUM_SEGMENTS,
    STAGE_CHANNELS,
    STAGE_STRIDES,
    WIDTHS,
    segment_input_channels,
)

FLOAT32_BYTES = 4


@dataclass(frozen=True)
class SegmentCost:
    """Cost of running ``segment`` at ``width`` on an activation produced at ``prev_width``.

    Attributes:
        segment: Segment number k (0-based).
        width: Width the segment runs at.
        prev_width: Width of the incoming activation (1.0 for segment 0: the image).
        param_bytes: Weights this computation reads (input and output channels both sliced).
        input_bytes_per_image: Bytes of the incoming activation of one image.
        activation_bytes_per_image: Bytes of the segment's output for one image.
        flops_per_image: FLOPs of one image (2 x multiply-accumulates of convs and classifier).
    """

    segment: int
    width: float
    prev_width: float
    param_bytes: int
    input_bytes_per_image: int
    activation_bytes_per_image: int
    flops_per_image: int


@dataclass(frozen=True)
class _Conv:
    in_channels: int
    out_channels: int
    kernel: int
    out_size: int

    @property
    def params(self) -> int:
        return self.in_channels * self.out_channels * self.kernel**2

    @property
    def flops(self) -> int:
        return 2 * self.params * self.out_size**2


def _spatial_size(image_size: int, stages: int) -> int:
    """Side length after the first ``stages`` stages."""
    size = image_size
    for stride in STAGE_STRIDES[:stages]:
        size = (size + stride - 1) // stride
    return size


def segment_cost(
    segment: int,
    width: float,
    prev_width: float,
    num_classes: int = 10,
    image_size: int = 32,
    in_channels: int = 3,
) -> SegmentCost:
    """The cost of one (segment, width, previous width), from the architecture's constants."""
    in_ch = segment_input_channels(segment, in_channels)
    if segment > 0:
        in_ch = channel_count(in_ch, prev_width)
    out_ch = channel_count(STAGE_CHANNELS[segment], width)
    in_size = _spatial_size(image_size, segment)
    out_size = _spatial_size(image_size, segment + 1)

    convs: list[_Conv] = []
    norms = 0  # GroupNorm layers (weight + bias of out_ch each)
    first_in = in_ch
    if segment == 0:
        convs.append(_Conv(in_ch, out_ch, 3, out_size))
        norms += 1
        first_in = out_ch
    for block in range(BLOCKS_PER_STAGE):
        block_in = first_in if block == 0 else out_ch
        convs += [_Conv(block_in, out_ch, 3, out_size), _Conv(out_ch, out_ch, 3, out_size)]
        norms += 2
        if block == 0 and segment > 0:  # 1x1 projection shortcut of a downsampling block
            convs.append(_Conv(block_in, out_ch, 1, out_size))
            norms += 1

    params = sum(c.params for c in convs) + norms * 2 * out_ch
    flops = sum(c.flops for c in convs)
    out_bytes = out_ch * out_size**2 * FLOAT32_BYTES
    if segment == NUM_SEGMENTS - 1:
        params += out_ch * num_classes + num_classes
        flops += 2 * out_ch * num_classes
        out_bytes = num_classes * FLOAT32_BYTES
    return SegmentCost(
        segment=segment,
        width=float(width),
        prev_width=float(prev_width),
        param_bytes=params * FLOAT32_BYTES,
        input_bytes_per_image=in_ch * in_size**2 * FLOAT32_BYTES,
        activation_bytes_per_image=out_bytes,
        flops_per_image=flops,
    )


def prev_widths_of(segment: int, widths: tuple[float, ...]) -> tuple[float, ...]:
    """Widths the input of ``segment`` can come in (only the whole image for segment 0)."""
    return (INPUT_WIDTH,) if segment == 0 else widths


class SegmentCostTable:
    """Costs of every (segment, width, previous width), plus the bytes of one loaded instance.

    Args:
        costs: One entry per key; must cover every key of ``widths``.
        instance_bytes: Parameter bytes of the standalone segment ``(segment, width)`` a server
            loads (:func:`hetsched.slim.model.slimresnet.extract_segment`: input channels kept
        whole). widths: The width choices.
        num_classes, image_size: What the costs were computed for.
    """

    def __init__(
        self,
        costs: list[SegmentCost],
        instance_bytes: dict[tuple[int, float], int],
        widths: tuple[float, ...] = WIDTHS,
        num_classes: int = 10,
        image_size: int = 32,
    ) -> None:
        self.widths = tuple(float(w) for w in widths)
        self.num_segments = NUM_SEGMENTS
        self.num_classes = num_classes
        self.image_size = image_size
        self._costs = {(c.segment, c.width, c.prev_width): c for c in costs}
        self._instance_bytes = dict(instance_bytes)
        for k in range(NUM_SEGMENTS):
            for w in self.widths:
                if (k, w) not in self._instance_bytes:
                    raise ValueError(f"no instance bytes for segment {k + 1} at width {w}")
                for p in prev_widths_of(k, self.widths):
                    if (k, w, p) not in self._costs:
                        raise ValueError(f"no cost for segment {k + 1}, width {w}, prev {p}")

    def get(self, segment: int, width: float, prev_width: float | None = None) -> SegmentCost:
        """Cost of ``segment`` at ``width`` on input of ``prev_width`` (None: segment 0's image).

        Raises:
            KeyError: For a key outside the table, naming it.
        """
        prev = INPUT_WIDTH if prev_width is None else float(prev_width)
        try:
            return self._costs[(segment, float(width), prev)]
        except KeyError:
            raise KeyError(
                f"no cost for segment {segment} (0-based), width {width}, previous width {prev};"
                f" widths {self.widths}, segment 0's previous width is {INPUT_WIDTH}"
            ) from None

    def instance_param_bytes(self, segment: int, width: float) -> int:
        """Bytes of the weights of one loaded instance of ``segment`` at ``width``."""
        return self._instance_bytes[(segment, float(width))]

    def entries(self) -> list[SegmentCost]:
        """Every entry, ordered by (segment, width, previous width)."""
        return [self._costs[key] for key in sorted(self._costs)]

    def to_json(self, path: Path) -> None:
        """Writes the table as JSON (human-readable, one object per entry)."""
        data = {
            "num_classes": self.num_classes,
            "image_size": self.image_size,
            "widths": list(self.widths),
            "num_segments": self.num_segments,
            "entries": [asdict(c) for c in self.entries()],
            "instances": [
                {"segment": k, "width": w, "param_bytes": b}
                for (k, w), b in sorted(self._instance_bytes.items())
            ],
        }
        Path(path).write_text(json.dumps(data, indent=1))

    @classmethod
    def from_json(cls, path: Path) -> SegmentCostTable:
        """Reads a table written by :meth:`to_json`.

        Raises:
            DataError: If the file is missing, not JSON, or lacks a field or an entry.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError("cost table not found", path=str(path)) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"cost table is not readable JSON: {error}", path=str(path)) from None
        try:
            costs = [SegmentCost(**entry) for entry in data["entries"]]
            instances = {
                (int(i["segment"]), float(i["width"])): int(i["param_bytes"])
                for i in data["instances"]
            }
            return cls(
                costs,
                instances,
                tuple(data["widths"]),
                int(data["num_classes"]),
                int(data["image_size"]),
            )
        except KeyError as error:
            raise DataError("cost table lacks a field", path=str(path), field=str(error)) from None
        except (TypeError, ValueError, AttributeError) as error:
            raise DataError(f"malformed cost table: {error}", path=str(path)) from None


def compute_cost_table(
    num_classes: int = 10, image_size: int = 32, widths: tuple[float, ...] = WIDTHS
) -> SegmentCostTable:
    """The cost table of SlimResNet for ``num_classes`` outputs and square ``image_size`` images."""
    costs = [
        segment_cost(k, w, p, num_classes, image_size)
        for k in range(NUM_SEGMENTS)
        for w in widths
        for p in prev_widths_of(k, widths)
    ]
    # A standalone instance keeps every input channel: its weights are those of prev width 1.0.
    instances = {
        (k, float(w)): segment_cost(k, w, INPUT_WIDTH, num_classes, image_size).param_bytes
        for k in range(NUM_SEGMENTS)
        for w in widths
    }
    return SegmentCostTable(costs, instances, widths, num_classes, image_size)
