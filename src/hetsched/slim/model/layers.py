"""Slimmable layers: one set of full-width weights, run at any leading slice of its channels.

A slimmable layer stores the weights of its widest configuration. At run time it uses the first
``in`` input channels (read from the incoming tensor, so a layer accepts whatever width the
previous layer ran at) and the first ``out`` output channels (chosen by the caller). Slicing a
leading prefix is what makes every width share its weights with every wider one (Yu et al.,
"Slimmable neural networks", ref. [1] of the Slim Scheduler paper).

GroupNorm replaces BatchNorm (paper section IV.1): its statistics are per image, so they do not
drift between widths the way shared batch statistics would.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def channel_count(base_channels: int, width: float) -> int:
    """Exact channel count of a layer of ``base_channels`` (at full width) run at ``width``.

    Raises:
        ValueError: If ``base_channels * width`` is not a whole number; rounding would let two
            widths share one channel count and blur which width a tensor came from.
    """
    channels = base_channels * width
    if channels < 1 or abs(channels - round(channels)) > 1e-9:
        raise ValueError(f"width {width} of {base_channels} channels is not a whole channel count")
    return round(channels)


class SlimConv2d(nn.Conv2d):
    """A bias-free convolution whose input and output channels are leading slices of its weights."""

    def __init__(
        self, max_in_channels: int, max_out_channels: int, kernel_size: int, stride: int = 1
    ) -> None:
        super().__init__(
            max_in_channels,
            max_out_channels,
            kernel_size,
            stride=stride,
            padding=kernel_size // 2,
            bias=False,
        )

    def forward(self, x: torch.Tensor, out_channels: int | None = None) -> torch.Tensor:
        in_channels = x.shape[1]
        out_channels = self.out_channels if out_channels is None else out_channels
        if in_channels > self.in_channels or out_channels > self.out_channels:
            raise ValueError(
                f"SlimConv2d({self.in_channels}->{self.out_channels}) cannot run"
                f" {in_channels}->{out_channels} channels"
            )
        weight = self.weight[:out_channels, :in_channels]
        return F.conv2d(x, weight, None, self.stride, self.padding)


class SlimGroupNorm(nn.Module):
    """GroupNorm with a fixed group count; the affine parameters are sliced to the input's channels.

    A fixed group count (rather than a fixed group size) keeps the normalisation of a width-w layer
    close to that of the full layer: each group covers the same fraction of the channels.
    """

    def __init__(self, max_channels: int, num_groups: int, eps: float = 1e-5) -> None:
        super().__init__()
        if max_channels % num_groups:
            raise ValueError(f"{num_groups} groups do not divide {max_channels} channels")
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(max_channels))
        self.bias = nn.Parameter(torch.zeros(max_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        if channels % self.num_groups or channels > self.weight.shape[0]:
            raise ValueError(
                f"SlimGroupNorm({self.weight.shape[0]}, groups={self.num_groups}) cannot"
                f" normalise {channels} channels"
            )
        return F.group_norm(
            x, self.num_groups, self.weight[:channels], self.bias[:channels], self.eps
        )


class SlimLinear(nn.Linear):
    """A classifier whose input features are a leading slice of its weights; outputs stay whole."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_features = x.shape[1]
        if in_features > self.in_features:
            raise ValueError(f"SlimLinear({self.in_features}) cannot take {in_features} features")
        return F.linear(x, self.weight[:, :in_features], self.bias)
