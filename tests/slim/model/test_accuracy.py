"""Accuracy table: 256 measured tuples with per-image answers, lookup, paper table, JSON."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.accuracy import (
    PAPER_TABLE_I,
    PAPER_TABLE_II,
    AccuracyTable,
    load_accuracy_table,
)
from hetsched.slim.model.slimresnet import WIDTHS


@pytest.fixture(scope="module")
def measured(model) -> tuple[AccuracyTable, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    images = torch.randn(10, 3, 16, 16, generator=generator)
    labels = torch.randint(0, 10, (10,), generator=generator)
    return AccuracyTable.measure(model, images, labels, batch_size=4), images, labels


def test_measured_table_covers_every_tuple_with_real_answers(model, measured) -> None:
    table, images, labels = measured
    assert len(table.tuples()) == 256 and all(table.is_measured(t) for t in table.tuples())
    with torch.no_grad():
        for widths in [(1.0,) * 4, (0.25, 1.0, 0.5, 0.75)]:
            expected = (model(images, widths).argmax(1) == labels).numpy()
            answers = [table.correct(widths, i) for i in range(10)]
            assert answers == expected.tolist()
            assert table.top1(widths) == pytest.approx(expected.mean())
    assert table.correct((1.0,) * 4, 10) is None and table.num_images == 10


def test_prefix_lookup_is_the_mean_over_completions(measured) -> None:
    table, _, _ = measured
    prefix = (0.5, 0.25)
    completions = [prefix + rest for rest in itertools.product(WIDTHS, repeat=2)]
    assert table.lookup(prefix) == pytest.approx(np.mean([table.top1(t) for t in completions]))
    assert table.lookup((0.75, 0.75, 0.75, 0.75)) == table.top1((0.75,) * 4)
    with pytest.raises(ValueError, match="1 to 4 widths"):
        table.lookup(())


def test_paper_table_nearest_neighbour() -> None:
    paper = load_accuracy_table("paper")
    for widths, top1 in {**PAPER_TABLE_I, **PAPER_TABLE_II}.items():
        assert paper.top1(widths) == top1 and paper.correct(widths, 0) is None
    # (1, 1, 1, 0.75) is 0.25 from (1, 1, 1, 1) and further from every other published tuple.
    assert paper.top1((1.0, 1.0, 1.0, 0.75)) == PAPER_TABLE_I[(1.0,) * 4]
    # Prefix (0.25,): distance 0 to (0.25,)*4 and to (0.25, 0.5, 0.75, 1): their mean.
    assert paper.lookup((0.25,)) == pytest.approx((0.7030 + 0.7533) / 2)
    assert all(0.70 <= paper.top1(t) <= 0.77 for t in paper.tuples())


def test_json_round_trip_keeps_per_image_answers(measured, tmp_path) -> None:
    table, _, _ = measured
    path = tmp_path / "accuracy_table.json"
    table.to_json(path)
    loaded = load_accuracy_table(path)
    for widths in table.tuples():
        assert loaded.top1(widths) == table.top1(widths)
        assert [loaded.correct(widths, i) for i in range(10)] == [
            table.correct(widths, i) for i in range(10)
        ]


def test_malformed_tables_raise_data_error(tmp_path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_accuracy_table(tmp_path / "absent.json")
    path = tmp_path / "bad.json"
    good = {"widths": [0.5, 1.0], "num_images": None, "entries": []}
    for entry, message in [
        ({"widths": [0.5, 1.0], "top1": 0.5}, "bad width tuple"),
        ({"widths": [0.5, 0.5, 0.5, 0.3], "top1": 0.5}, "bad width tuple"),
        ({"widths": [0.5] * 4, "top1": 7}, "not a fraction"),
        ({"widths": [0.5] * 4}, "lacks a field"),
    ]:
        path.write_text(json.dumps({**good, "entries": [entry]}))
        with pytest.raises(DataError, match=message):
            load_accuracy_table(path)
