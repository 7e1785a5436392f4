"""The model-feature catalogue: per model name, the eqs. 1-5 features the regressor needs.

Why a catalogue: a pod may only *name* its model (annotation ``hetsched.io/model``). The features
behind the name are computed offline from trusted input (``hetsched tail catalog``, see
:mod:`hetsched.tail.catalog_build`) and loaded when the extender or the scheduler loop starts, so
nothing a pod says is ever fetched, opened or run. A name that is not a catalogue key gets the
documented fallback (neutral scores), never a lookup anywhere else.

The file is JSON with a strict schema (pydantic, unknown fields rejected, no type coercion).
The built-in zoo's catalogue ships as package data (``hetsched/tail/data/model_catalog.json``) and
is the default; regenerate it with
``hetsched tail catalog --out src/hetsched/tail/data/model_catalog.json`` after changing the zoo.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hetsched.core.errors import DataError
from hetsched.tail.flops import ModelFeatures

CATALOG_SCHEMA_VERSION: Literal[1] = 1
# A catalogue key: lower-case letters, digits and ".-_", 1-63 characters, starting and ending with a
# letter or digit (a Kubernetes label-value-like name). Anything else in an annotation is refused
# before any lookup, which also keeps metric labels and log lines free of attacker text.
MODEL_KEY_MAX_CHARS = 63
MODEL_KEY_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?")
# A catalogue is a few KiB per hundred models; refuse to read anything absurdly larger.
MAX_CATALOG_BYTES = 16 * 2**20
DEFAULT_CATALOG_RESOURCE = "data/model_catalog.json"


def is_model_key(text: str) -> bool:
    """Whether ``text`` has the shape of a catalogue key (see :data:`MODEL_KEY_PATTERN`)."""
    return len(text) <= MODEL_KEY_MAX_CHARS and MODEL_KEY_PATTERN.fullmatch(text) is not None


class CatalogEntry(BaseModel):
    """One model's features: eqs. 1-5 FLOPs per batch-1 inference, size, parameters, and where
    they were counted from (``source``) at which input shape."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    flops: int = Field(ge=0, description="Eq. 5: total FLOPs per inference.")
    size_mb: float = Field(ge=0, allow_inf_nan=False, description="MiB of parameters + buffers.")
    parameters: int = Field(ge=0, description="Number of weights and biases.")
    conv_flops: int = Field(ge=0, description="Eq. 1.")
    dense_flops: int = Field(ge=0, description="Eq. 2.")
    activation_flops: int = Field(ge=0, description="Eq. 3.")
    pooling_flops: int = Field(ge=0, description="Eq. 4.")
    input_shape: tuple[int, ...] = Field(min_length=1, description="Shape the model was run at.")
    source: str = Field(max_length=200, description="What was counted, e.g. 'zoo:resnet50'.")

    @model_validator(mode="after")
    def _total_is_eq5(self) -> CatalogEntry:
        parts = self.conv_flops + self.dense_flops + self.activation_flops + self.pooling_flops
        if parts != self.flops:
            raise ValueError(f"flops {self.flops} is not the sum of its parts ({parts}), eq. 5")
        if min(self.input_shape) <= 0:
            raise ValueError(f"input_shape {self.input_shape} has a non-positive dimension")
        return self

    def features(self, name: str) -> ModelFeatures:
        """The regressor's model features (eq. 14) under ``name``."""
        return ModelFeatures(
            name=name,
            flops=self.flops,
            size_mb=self.size_mb,
            conv_flops=self.conv_flops,
            dense_flops=self.dense_flops,
            activation_flops=self.activation_flops,
            pooling_flops=self.pooling_flops,
        )


class ModelCatalog(BaseModel):
    """Catalogue file: schema version, what counted the FLOPs, and the entries by model key."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    schema_version: Literal[1] = CATALOG_SCHEMA_VERSION
    counter: str = Field(max_length=200, description="The FLOP counter and its version.")
    models: dict[str, CatalogEntry]

    @model_validator(mode="after")
    def _keys_are_model_keys(self) -> ModelCatalog:
        bad = [k for k in self.models if not is_model_key(k)]
        if bad:
            raise ValueError(f"not catalogue keys (a-z, 0-9, '.-_', <= 63 chars): {bad[:5]}")
        return self

    def features(self, key: str) -> ModelFeatures | None:
        """Features of catalogue key ``key``; None if the catalogue has no such key."""
        entry = self.models.get(key)
        return None if entry is None else entry.features(key)

    def model_keys(self) -> list[str]:
        """The catalogue's model keys, sorted."""
        return sorted(self.models)


def parse_catalog(data: bytes, origin: str) -> ModelCatalog:
    """Validates catalogue JSON; a malformed file is a :class:`DataError` naming ``origin``."""
    if len(data) > MAX_CATALOG_BYTES:
        raise DataError(f"catalogue is {len(data)} bytes, over {MAX_CATALOG_BYTES}", path=origin)
    try:
        return ModelCatalog.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"not a model catalogue: {where}: {first['msg']}", path=origin) from None


def load_catalog(path: str | Path) -> ModelCatalog:
    """Reads a catalogue file written by ``hetsched tail catalog`` (trusted, operator-supplied)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("model catalogue not found", path=str(path))
    if path.stat().st_size > MAX_CATALOG_BYTES:
        raise DataError(f"catalogue is over {MAX_CATALOG_BYTES} bytes", path=str(path))
    return parse_catalog(path.read_bytes(), str(path))


@lru_cache(maxsize=1)
def default_catalog() -> ModelCatalog:
    """The built-in zoo's catalogue shipped with the package (read once per process)."""
    resource = resources.files("hetsched.tail").joinpath(DEFAULT_CATALOG_RESOURCE)
    return parse_catalog(resource.read_bytes(), f"hetsched.tail/{DEFAULT_CATALOG_RESOURCE}")


def save_catalog(catalog: ModelCatalog, path: str | Path) -> None:
    """Writes ``catalog`` as indented JSON (stable key order, so regenerating it diffs cleanly)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(catalog.model_dump_json(indent=1) + "\n")
