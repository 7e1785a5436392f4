"""SlimResNet: a universally slimmable CIFAR ResNet-18 cut into four separately runnable segments.

Architecture (CIFAR ResNet-18 class, paper section IV.1): a 3x3 stem, four stages of two
BasicBlocks with 64-128-256-512 channels (stride 1, 2, 2, 2), global average pooling and a linear
classifier; GroupNorm throughout. The four segments are

====  =============================  ======================  ===============
 k     layers                          input (full width)      output
====  =============================  ======================  ===============
 0     stem + stage 1                  3 x 32 x 32             64 x 32 x 32
 1     stage 2                         64 x 32 x 32            128 x 16 x 16
 2     stage 3                         128 x 16 x 16           256 x 8 x 8
 3     stage 4 + pool + classifier     256 x 8 x 8             num_classes
====  =============================  ======================  ===============

Every segment runs at its own width w in :data:`WIDTHS` (output channels = base x w, exactly) and
accepts the output of the previous segment at any width: its first convolutions read as many input
channels as the tensor carries. That is why the executor keys its queues on (segment, w, w_prev).
Segments are 0-based in code and printed 1-based for users.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from hetsched.slim.model.layers import SlimConv2d, SlimGroupNorm, SlimLinear, channel_count

WIDTHS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
"""Width ratios every segment can run at (the paper's W)."""
NUM_SEGMENTS = 4
STAGE_CHANNELS = (64, 128, 256, 512)
"""Full-width output channels of each stage; segment k ends with stage k."""
STAGE_STRIDES = (1, 2, 2, 2)
BLOCKS_PER_STAGE = 2
NUM_GROUPS = 8
"""GroupNorm groups: divides 64 x w, 128 x w, ... for every w in WIDTHS (16 channels and up)."""
INPUT_WIDTH = 1.0
"""The "previous width" of segment 0, whose input is the whole image."""


def segment_input_channels(segment: int, in_channels: int = 3) -> int:
    """Full-width input channels of ``segment`` (the image's channels for segment 0)."""
    return in_channels if segment == 0 else STAGE_CHANNELS[segment - 1]


def input_width(segment: int, channels: int, widths: Sequence[float] = WIDTHS) -> float:
    """The width an activation entering ``segment`` was produced at, from its channel count.

    Raises:
        ValueError: If no width of ``widths`` gives ``channels`` (e.g. a tensor for another
            segment).
    """
    if segment == 0:
        return INPUT_WIDTH
    base = STAGE_CHANNELS[segment - 1]
    for width in widths:
        if channel_count(base, width) == channels:
            return float(width)
    raise ValueError(
        f"{channels} channels are no width of segment {segment + 1}'s input "
        f"({base} x {tuple(widths)})"
    )


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (a 1x1 projection when downsampling)."""

    def __init__(self, max_in: int, max_out: int, stride: int, project: bool) -> None:
        super().__init__()
        self.conv1 = SlimConv2d(max_in, max_out, 3, stride)
        self.norm1 = SlimGroupNorm(max_out, NUM_GROUPS)
        self.conv2 = SlimConv2d(max_out, max_out, 3)
        self.norm2 = SlimGroupNorm(max_out, NUM_GROUPS)
        self.shortcut_conv = SlimConv2d(max_in, max_out, 1, stride) if project else None
        self.shortcut_norm = SlimGroupNorm(max_out, NUM_GROUPS) if project else None
        # Each block starts as (nearly) the identity: the residual branch's last scale is zero.
        # Deep GroupNorm ResNets train much faster from this start (Goyal et al., 2017).
        nn.init.zeros_(self.norm2.weight)

    def forward(self, x: torch.Tensor, out_channels: int) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x, out_channels)))
        out = self.norm2(self.conv2(out, out_channels))
        if self.shortcut_conv is not None and self.shortcut_norm is not None:
            shortcut = self.shortcut_norm(self.shortcut_conv(x, out_channels))
        else:
            shortcut = x
        return torch.relu(out + shortcut)


class SlimSegment(nn.Module):
    """One of the four segments, holding weights for up to ``max_out_channels`` output channels.

    Args:
        index: Segment number k (0-based).
        max_in_channels: Input channels the weights cover (the previous segment's full width).
        max_out_channels: Output channels of the stage the weights cover.
        num_classes: Classifier outputs (used by the last segment only).
    """

    def __init__(
        self, index: int, max_in_channels: int, max_out_channels: int, num_classes: int
    ) -> None:
        super().__init__()
        self.index = index
        self.max_in_channels = max_in_channels
        self.max_out_channels = max_out_channels
        if index == 0:
            self.stem_conv = SlimConv2d(max_in_channels, max_out_channels, 3)
            self.stem_norm = SlimGroupNorm(max_out_channels, NUM_GROUPS)
            first_in = max_out_channels
        else:
            first_in = max_in_channels
        stride = STAGE_STRIDES[index]
        self.blocks = nn.ModuleList(
            [BasicBlock(first_in, max_out_channels, stride, project=index > 0)]
            + [
                BasicBlock(max_out_channels, max_out_channels, 1, project=False)
                for _ in range(BLOCKS_PER_STAGE - 1)
            ]
        )
        self.classifier = (
            SlimLinear(max_out_channels, num_classes) if index == NUM_SEGMENTS - 1 else None
        )

    def forward(self, x: torch.Tensor, width: float) -> torch.Tensor:
        """Runs the segment at ``width`` (of ``max_out_channels``) on ``x`` of any width."""
        if x.dim() != 4 or x.shape[1] > self.max_in_channels:
            raise ValueError(
                f"segment {self.index + 1} takes N x C x H x W with C <= {self.max_in_channels},"
                f" got shape {tuple(x.shape)}"
            )
        out_channels = channel_count(self.max_out_channels, width)
        if self.index == 0:
            x = torch.relu(self.stem_norm(self.stem_conv(x, out_channels)))
        for block in self.blocks:
            x = block(x, out_channels)
        if self.classifier is not None:
            x = self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
        return x


class SegmentAtWidth(nn.Module):
    """A runnable (segment, width): ``forward(x)`` on an activation of any previous width.

    Attributes:
        segment: Segment number k (0-based).
        width: The width this module computes, as a ratio of the full model's channels.
    """

    def __init__(self, body: SlimSegment, width: float, run_width: float | None = None) -> None:
        super().__init__()
        self.body = body
        self.segment = body.index
        self.width = width
        self._run_width = width if run_width is None else run_width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x, self._run_width)


class SlimResNet(nn.Module):
    """A slimmable ResNet-18 for 32x32 images, run segment by segment at per-segment widths.

    Args:
        num_classes: Classifier outputs.
        in_channels: Image channels.
        widths: Widths the model is trained and served at; each must give whole channel counts
            divisible by the GroupNorm group count in every stage.
    """

    def __init__(
        self, num_classes: int, in_channels: int = 3, widths: Sequence[float] = WIDTHS
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.widths = tuple(sorted(float(w) for w in widths))
        for width in self.widths:
            for base in STAGE_CHANNELS:
                if channel_count(base, width) % NUM_GROUPS:
                    raise ValueError(
                        f"width {width}: {base} x {width} channels do not split into"
                        f" {NUM_GROUPS} GroupNorm groups"
                    )
        self.segments = nn.ModuleList(
            [
                SlimSegment(
                    k, segment_input_channels(k, in_channels), STAGE_CHANNELS[k], num_classes
                )
                for k in range(NUM_SEGMENTS)
            ]
        )

    def forward(
        self, x: torch.Tensor, widths: Sequence[float] = (1.0,) * NUM_SEGMENTS
    ) -> torch.Tensor:
        """Logits of ``x`` with segment k run at ``widths[k]``."""
        if len(widths) != NUM_SEGMENTS:
            raise ValueError(f"expected {NUM_SEGMENTS} widths, got {tuple(widths)}")
        for segment, width in zip(self.segments, widths, strict=True):
            x = segment(x, self.check_width(width))
        return x

    def segment(self, k: int, width: float) -> SegmentAtWidth:
        """Segment ``k`` at ``width``, sharing this model's weights (no copy)."""
        return SegmentAtWidth(self.full_segment(k), self.check_width(width))

    def full_segment(self, k: int) -> SlimSegment:
        """Segment ``k``'s module at full width (its weights cover every width)."""
        return cast(SlimSegment, self.segments[k])

    def check_width(self, width: float) -> float:
        """``width`` as a float, if it is one of the model's widths.

        Raises:
            ValueError: For any other width.
        """
        if width not in self.widths:
            raise ValueError(f"width {width} is not one of the model's widths {self.widths}")
        return float(width)


def extract_segment(model: SlimResNet, k: int, width: float) -> SegmentAtWidth:
    """A standalone copy of segment ``k`` holding only the weights ``width`` uses.

    Output channels are cut to ``width``; input channels stay whole, so the copy accepts the
    previous segment's output at any width. This is what a server loads for one instance.
    """
    width = model.check_width(width)
    source = model.full_segment(k)
    body = SlimSegment(
        k, source.max_in_channels, channel_count(source.max_out_channels, width), model.num_classes
    )
    full = source.state_dict()
    sliced = {
        name: full[name][tuple(slice(0, n) for n in tensor.shape)].clone()
        for name, tensor in body.state_dict().items()
    }
    body.load_state_dict(sliced)
    return SegmentAtWidth(body, width, run_width=1.0).to(next(source.parameters()).device)
