"""Data loaders: digits shapes and split, CIFAR-100 pickles (real format, tiny), clear errors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from hetsched.core.errors import DataError
from hetsched.slim.model.data import augment_batch, load_dataset


def _write_cifar(folder, num_train=6, num_test=4, num_classes=100, data_shape=None) -> None:
    """A CIFAR-100 python release in miniature: pickled dicts with bytes keys, uint8 rows."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in (("train", num_train), ("test", num_test)):
        entry = {
            b"data": rng.integers(0, 256, data_shape or (n, 3072), dtype=np.uint8),
            b"fine_labels": [int(v) for v in rng.integers(0, num_classes, n)],
            b"coarse_labels": [0] * n,
        }
        (folder / name).write_bytes(pickle.dumps(entry))
    meta = {b"fine_label_names": [f"class{i}".encode() for i in range(num_classes)]}
    (folder / "meta").write_bytes(pickle.dumps(meta))


def test_digits_are_normalised_32x32_rgb_with_a_fixed_split() -> None:
    first, second = load_dataset("digits"), load_dataset("digits")
    assert first.train_images.shape == (1438, 3, 32, 32)
    assert first.test_images.shape == (359, 3, 32, 32)
    assert first.num_classes == 10 and not first.augment
    assert abs(float(first.train_images.mean())) < 1e-3
    assert torch.equal(first.test_labels, second.test_labels)
    assert load_dataset("digits:16").train_images.shape[-2:] == (16, 16)
    assert len(first.limited(7).train_labels) == 7


@pytest.mark.parametrize("spec", ["mnist", "digits:4", "digits:x"])
def test_unknown_specs_are_rejected(spec) -> None:
    with pytest.raises(DataError, match="digits"):
        load_dataset(spec)


def test_cifar100_pickles_load(tmp_path) -> None:
    _write_cifar(tmp_path / "cifar-100-python")
    data = load_dataset(f"cifar100:{tmp_path}")  # the parent folder works too
    assert data.train_images.shape == (6, 3, 32, 32) and data.test_images.shape == (4, 3, 32, 32)
    assert data.num_classes == 100 and data.class_names[3] == "class3" and data.augment
    raw = pickle.loads((tmp_path / "cifar-100-python" / "train").read_bytes())[b"data"]
    pixel = raw[2, 1024 + 5 * 32 + 7] / 255.0  # image 2, green channel, row 5, column 7
    assert float(data.train_images[2, 1, 5, 7]) == pytest.approx((pixel - 0.4865) / 0.2564, 1e-5)


def test_cifar100_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(DataError, match="folder not found"):
        load_dataset(f"cifar100:{tmp_path / 'absent'}")
    folder = tmp_path / "c"
    _write_cifar(folder)
    os.remove(folder / "test")
    with pytest.raises(DataError, match=r"test: CIFAR-100 file not found"):
        load_dataset(f"cifar100:{folder}")
    _write_cifar(folder, data_shape=(6, 100))
    with pytest.raises(DataError, match="N x 3072"):
        load_dataset(f"cifar100:{folder}")
    _write_cifar(folder, num_classes=3)  # meta lists 3 classes, labels 0..2: fine
    assert load_dataset(f"cifar100:{folder}").num_classes == 3
    (folder / "meta").write_bytes(b"garbage")
    with pytest.raises(DataError, match="meta: not a CIFAR-100 python pickle"):
        load_dataset(f"cifar100:{folder}")


def test_pickles_that_would_run_code_are_refused(tmp_path) -> None:
    _write_cifar(tmp_path)
    (tmp_path / "train").write_bytes(pickle.dumps({b"data": os.system}))
    with pytest.raises(DataError, match="refusing"):
        load_dataset(f"cifar100:{tmp_path}")


def test_augmentation_crops_and_flips_each_image() -> None:
    images = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).view(2, 3, 8, 8)
    out = augment_batch(images, torch.Generator().manual_seed(0), padding=2)
    assert out.shape == images.shape
    for i in range(2):
        padded = torch.nn.functional.pad(images[i], (2, 2, 2, 2))
        candidates = [
            view[:, y : y + 8, x : x + 8]
            for view in (padded, padded.flip(2))
            for y in range(5)
            for x in range(5)
        ]
        assert any(torch.equal(out[i], c) for c in candidates)
