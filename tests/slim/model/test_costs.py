"""Segment cost table: FLOPs and bytes agree with the modules; JSON round trip; bad files."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from hetsched.core.errors import DataError
from hetsched.slim.model.costs import SegmentCostTable, compute_cost_table, prev_widths_of
from hetsched.slim.model.layers import channel_count
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, STAGE_CHANNELS, WIDTHS, extract_segment


@pytest.fixture(scope="module")
def table() -> SegmentCostTable:
    return compute_cost_table(num_classes=10, image_size=32)


def _input(segment: int, prev: float) -> torch.Tensor:
    if segment == 0:
        return torch.zeros(1, 3, 32, 32)
    size = 32 // 2 ** (segment - 1)
    return torch.zeros(1, channel_count(STAGE_CHANNELS[segment - 1], prev), size, size)


@pytest.mark.parametrize("segment", range(NUM_SEGMENTS))
def test_flops_and_bytes_match_the_modules(model, table, segment) -> None:
    for width, prev in itertools.product(WIDTHS, prev_widths_of(segment, WIDTHS)):
        cost = table.get(segment, width, prev)
        x = _input(segment, prev)
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            out = model.segment(segment, width)(x)
        assert counter.get_total_flops() == cost.flops_per_image
        assert cost.input_bytes_per_image == x.numel() * 4
        assert cost.activation_bytes_per_image == out.numel() * 4
    for width in WIDTHS:
        extracted = extract_segment(model, segment, width)
        assert table.instance_param_bytes(segment, width) == 4 * sum(
            p.numel() for p in extracted.parameters()
        )


def test_costs_grow_with_width(table) -> None:
    for segment in range(NUM_SEGMENTS):
        flops = [table.get(segment, w, 1.0).flops_per_image for w in WIDTHS]
        assert flops == sorted(flops) and len(set(flops)) == len(WIDTHS)
    assert table.get(0, 0.5, None) == table.get(0, 0.5, 1.0)
    with pytest.raises(KeyError, match=r"previous width 0\.5"):
        table.get(0, 0.5, 0.5)


def test_json_round_trip(table, tmp_path) -> None:
    path = tmp_path / "costs.json"
    table.to_json(path)
    loaded = SegmentCostTable.from_json(path)
    assert loaded.entries() == table.entries()
    assert loaded.instance_param_bytes(3, 0.75) == table.instance_param_bytes(3, 0.75)
    assert (loaded.widths, loaded.num_segments) == (table.widths, table.num_segments)


def test_malformed_json_raises_data_error(tmp_path) -> None:
    with pytest.raises(DataError, match="not found"):
        SegmentCostTable.from_json(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match=r"bad\.json"):
        SegmentCostTable.from_json(bad)
    bad.write_text('{"widths": [1.0]}')
    with pytest.raises(DataError, match="lacks a field"):
        SegmentCostTable.from_json(bad)
