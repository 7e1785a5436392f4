"""SlimResNet: shapes at every width, exact slicing, segment-by-segment equals whole-model."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
import torch.nn.functional as F

from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import (
    NUM_SEGMENTS,
    STAGE_CHANNELS,
    WIDTHS,
    SlimResNet,
    extract_segment,
    input_width,
)

ALL_TUPLES = list(itertools.product(WIDTHS, repeat=NUM_SEGMENTS))
SAMPLED = [t for t in ALL_TUPLES if len(set(t)) == 1] + random.Random(0).sample(ALL_TUPLES, 12)


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def test_channel_lists_are_exact_and_distinct() -> None:
    for base in STAGE_CHANNELS:
        counts = [channel_count(base, w) for w in WIDTHS]
        assert counts == [base // 4, base // 2, 3 * base // 4, base]
    with pytest.raises(ValueError, match="whole channel count"):
        channel_count(64, 0.3)


def test_widths_that_break_groupnorm_are_rejected() -> None:
    with pytest.raises(ValueError, match="GroupNorm groups"):
        SlimResNet(10, widths=(0.0625, 1.0))


@pytest.mark.parametrize("widths", SAMPLED)
def test_output_shape_and_activation_channels(model, images, widths) -> None:
    with torch.no_grad():
        assert model(images, widths).shape == (2, 10)
        x = images
        for k, width in enumerate(widths):
            x = model.segment(k, width)(x)
            if k < NUM_SEGMENTS - 1:
                assert x.shape[1] == channel_count(STAGE_CHANNELS[k], width)
        assert x.shape == (2, 10)


def test_full_width_equals_plain_forward(model, images) -> None:
    """Width 1.0 slices nothing: the result equals running the full weights with plain torch ops."""

    def gn(norm, x):
        return F.group_norm(x, norm.num_groups, norm.weight, norm.bias, norm.eps)

    def conv(layer, x):
        return F.conv2d(x, layer.weight, None, layer.stride, layer.padding)

    with torch.no_grad():
        x = images
        for segment in model.segments:
            if segment.index == 0:
                x = torch.relu(gn(segment.stem_norm, conv(segment.stem_conv, x)))
            for block in segment.blocks:
                out = torch.relu(gn(block.norm1, conv(block.conv1, x)))
                out = gn(block.norm2, conv(block.conv2, out))
                if block.shortcut_conv is not None:
                    x = gn(block.shortcut_norm, conv(block.shortcut_conv, x))
                x = torch.relu(out + x)
        plain = segment.classifier.weight @ x.mean(dim=(2, 3)).T
        plain = plain.T + segment.classifier.bias
        torch.testing.assert_close(model(images), plain)


@pytest.mark.parametrize("widths", SAMPLED[::3])
def test_segments_and_extracted_segments_equal_whole_model(model, images, widths) -> None:
    with torch.no_grad():
        whole = model(images, widths)
        x_in_model, x_extracted = images, images
        for k, width in enumerate(widths):
            x_in_model = model.segment(k, width)(x_in_model)
            x_extracted = extract_segment(model, k, width)(x_extracted)
        torch.testing.assert_close(x_in_model, whole, rtol=0, atol=0)
        torch.testing.assert_close(x_extracted, whole, rtol=1e-5, atol=1e-5)


def test_extracted_segment_holds_only_its_slice(model) -> None:
    full = sum(p.numel() for p in model.segments[1].parameters())
    quarter = extract_segment(model, 1, 0.25)
    assert sum(p.numel() for p in quarter.parameters()) < full / 3
    assert quarter.segment == 1 and quarter.width == 0.25


def test_input_width_is_read_from_the_channel_count(model, images) -> None:
    assert input_width(0, 3) == 1.0
    with torch.no_grad():
        x = model.segment(0, 0.75)(images)
    assert input_width(1, x.shape[1]) == 0.75
    with pytest.raises(ValueError, match="no width of segment 3"):
        input_width(2, 100)


def test_extracted_segment_accepts_any_previous_width(model) -> None:
    segment = extract_segment(model, 2, 0.5)
    with torch.no_grad():
        for prev in WIDTHS:
            x = torch.randn(1, channel_count(128, prev), 16, 16)
            torch.testing.assert_close(segment(x), model.segment(2, 0.5)(x), rtol=1e-5, atol=1e-5)


def test_bad_inputs_are_rejected(model) -> None:
    with pytest.raises(ValueError, match="not one of the model's widths"):
        model.segment(0, 0.3)
    with pytest.raises(ValueError, match="C <= 64"):
        model.segment(1, 1.0)(torch.randn(1, 128, 32, 32))
    with pytest.raises(ValueError, match="expected 4 widths"):
        model(torch.randn(1, 3, 32, 32), (1.0, 1.0))
