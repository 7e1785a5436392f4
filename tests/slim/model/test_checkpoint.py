"""Checkpoints: round trip, and clear errors for missing or foreign files."""

from __future__ import annotations

import pytest
import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.checkpoint import load_model, save_checkpoint


def test_round_trip_restores_the_same_function(model, tmp_path) -> None:
    path = tmp_path / "sub" / "checkpoint.pt"
    save_checkpoint(path, model, epoch=3, config={"data": "digits"})
    loaded = load_model(path)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        for widths in ((1.0,) * 4, (0.25, 0.75, 0.5, 1.0)):
            torch.testing.assert_close(loaded(x, widths), model(x, widths), rtol=0, atol=0)
    assert not loaded.training and loaded.num_classes == model.num_classes


def test_missing_and_corrupt_files_raise_data_error(tmp_path) -> None:
    with pytest.raises(DataError, match=r"absent\.pt: checkpoint not found"):
        load_model(tmp_path / "absent.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"\x00not a zip")
    with pytest.raises(DataError, match=r"corrupt\.pt: not a readable checkpoint"):
        load_model(corrupt)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(DataError, match=r"foreign\.pt: not a hetsched-slimresnet"):
        load_model(foreign)
