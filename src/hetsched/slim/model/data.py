"""Image data for SlimResNet: an embedded default (scikit-learn digits) and CIFAR-100 from disk.

Both come back as normalised float32 tensors of shape N x 3 x 32 x 32 with int64 labels, so the
model, training and accuracy code never branch on the data set.

* ``digits``: scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes, no
  download), upsampled bilinearly to 32x32 and repeated over 3 channels; a fixed seeded 80/20
  split. No augmentation (a flipped digit is another symbol).
* ``cifar100:PATH``: the standard python release (a ``cifar-100-python/`` folder with pickled
  ``train``, ``test`` and ``meta``); 100 fine labels; training batches are augmented with a random
  4-pixel-padded crop and a horizontal flip (:func:`augment_batch`).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from hetsched.core.errors import DataError

IMAGE_SIZE = 32
DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)


@dataclass(frozen=True)
class ImageDataset:
    """A train/test split of normalised images.

    Attributes:
        name: The spec it was loaded from (``digits`` or ``cifar100:PATH``).
        train_images, test_images: float32, N x 3 x 32 x 32, normalised per channel.
        train_labels, test_labels: int64 class indices.
        class_names: One name per class.
        augment: Whether training should augment batches (crop + flip).
        pixel_mean, pixel_std: Per-channel statistics the images were normalised with, for
            pixels scaled to [0, 1] (how a served PNG/JPEG is turned into a model input).
    """

    name: str
    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    class_names: tuple[str, ...]
    augment: bool
    pixel_mean: tuple[float, ...] = (0.0,)
    pixel_std: tuple[float, ...] = (1.0,)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def limited(self, max_images: int | None) -> ImageDataset:
        """The first ``max_images`` of each split (for tiny-budget runs); all if None."""
        if max_images is None:
            return self
        return replace(
            self,
            train_images=self.train_images[:max_images],
            train_labels=self.train_labels[:max_images],
            test_images=self.test_images[:max_images],
            test_labels=self.test_labels[:max_images],
        )


def load_dataset(spec: str) -> ImageDataset:
    """Loads ``digits`` (32x32), ``digits:SIZE`` (SIZE x SIZE) or ``cifar100:PATH``.

    Raises:
        DataError: For an unknown spec or a missing / malformed CIFAR-100 folder.
    """
    if spec == "digits":
        return load_digits()
    if spec.startswith("digits:"):
        size = spec.removeprefix("digits:")
        if not size.isdigit() or not 8 <= int(size) <= 64:
            raise DataError(f"{spec!r}: the digits image size must be a number from 8 to 64")
        return load_digits(int(size))
    if spec.startswith("cifar100:"):
        return load_cifar100(Path(spec.removeprefix("cifar100:")))
    raise DataError(f"unknown data set {spec!r}; use 'digits' or 'cifar100:PATH'")


def load_digits(image_size: int = IMAGE_SIZE) -> ImageDataset:
    """scikit-learn's digits, upsampled to ``image_size`` RGB, split 80/20 with a fixed seed.

    The native images are 8x8, so 16x16 keeps every detail at a quarter of the 32x32 compute:
    the demo uses it to fit its time budget on two CPU cores.
    """
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(images, size=(image_size, image_size), mode="bilinear")
    images = images.repeat(1, 3, 1, 1)
    labels = torch.tensor(bunch.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(DIGITS_SPLIT_SEED))
    num_test = round(DIGITS_TEST_FRACTION * len(labels))
    test, train = order[:num_test], order[num_test:]
    mean, std = images[train].mean(), images[train].std()
    images = (images - mean) / std
    return ImageDataset(
        name="digits" if image_size == IMAGE_SIZE else f"digits:{image_size}",
        train_images=images[train].contiguous(),
        train_labels=labels[train],
        test_images=images[test].contiguous(),
        test_labels=labels[test],
        class_names=tuple(str(d) for d in range(10)),
        augment=False,
        pixel_mean=(float(mean),) * 3,
        pixel_std=(float(std),) * 3,
    )


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles only plain containers and numpy arrays: a dataset file cannot run code."""

    _ALLOWED: ClassVar[frozenset[str]] = frozenset({"_reconstruct", "ndarray", "dtype", "scalar"})

    def find_class(self, module: str, name: str):
        if module.split(".")[0] == "numpy" and name in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _unpickle(path: Path) -> dict:
    if not path.is_file():
        raise DataError("CIFAR-100 file not found", path=str(path))
    try:
        with path.open("rb") as handle:
            data = _ArrayUnpickler(handle, encoding="bytes").load()
    except Exception as error:  # any failure to unpickle means the file is not what we expect
        raise DataError(f"not a CIFAR-100 python pickle: {error}", path=str(path)) from None
    if not isinstance(data, dict):
        raise DataError("expected a pickled dict", path=str(path))
    return data


def _field(data: dict, key: str, path: Path):
    for candidate in (key.encode(), key):
        if candidate in data:
            return data[candidate]
    raise DataError("missing entry", path=str(path), field=key)


def _cifar_split(path: Path, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    data = _unpickle(path)
    pixels = np.asarray(_field(data, "data", path))
    labels = np.asarray(_field(data, "fine_labels", path))
    if pixels.ndim != 2 or pixels.shape[1] != 3 * IMAGE_SIZE * IMAGE_SIZE:
        raise DataError(
            f"expected N x 3072 pixels, got shape {pixels.shape}", path=str(path), field="data"
        )
    if labels.shape != (pixels.shape[0],):
        raise DataError(
            f"{labels.shape} labels for {pixels.shape[0]} images", path=str(path), field="labels"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataError(f"labels outside 0..{num_classes - 1}", path=str(path), field="labels")
    images = torch.tensor(pixels.astype(np.float32) / 255.0).view(-1, 3, IMAGE_SIZE, IMAGE_SIZE)
    mean = torch.tensor(CIFAR100_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR100_STD).view(1, 3, 1, 1)
    return (images - mean) / std, torch.tensor(labels, dtype=torch.int64)


def load_cifar100(folder: Path) -> ImageDataset:
    """CIFAR-100 from its python release; ``folder`` is ``cifar-100-python/`` or its parent.

    Raises:
        DataError: Naming the folder or file that is missing or malformed.
    """
    if not folder.is_dir():
        raise DataError("CIFAR-100 folder not found", path=str(folder))
    if not (folder / "meta").exists() and (folder / "cifar-100-python").is_dir():
        folder = folder / "cifar-100-python"
    meta_path = folder / "meta"
    names = [
        n.decode() if isinstance(n, bytes) else str(n)
        for n in _field(_unpickle(meta_path), "fine_label_names", meta_path)
    ]
    train_images, train_labels = _cifar_split(folder / "train", len(names))
    test_images, test_labels = _cifar_split(folder / "test", len(names))
    return ImageDataset(
        name=f"cifar100:{folder}",
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        class_names=tuple(names),
        augment=True,
        pixel_mean=CIFAR100_MEAN,
        pixel_std=CIFAR100_STD,
    )


def augment_batch(
    images: torch.Tensor, generator: torch.Generator, padding: int = 4
) -> torch.Tensor:
    """Random crop of the zero-padded image and random horizontal flip, independently per image.

    Args:
        images: N x C x H x W batch (on any device).
        generator: CPU generator the crop offsets and flips are drawn from (reproducible per seed).
        padding: Pixels of zero padding on each side before cropping.
    """
    n, _, height, width = images.shape
    padded = F.pad(images, (padding, padding, padding, padding))
    offset_y = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
    offset_x = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
    flip = torch.rand(n, generator=generator) < 0.5
    columns = torch.arange(width).expand(n, width)
    columns = torch.where(flip[:, None], columns.flip(1), columns) + offset_x[:, None]
    rows = torch.arange(height)[None, :] + offset_y[:, None]
    index = torch.arange(n)[:, None, None]
    device = images.device
    cropped = padded[
        index.to(device), :, rows[:, :, None].to(device), columns[:, None, :].to(device)
    ]
    return cropped.permute(0, 3, 1, 2).contiguous()
