"""Which model a pod runs: its ``hetsched.io/model`` annotation, checked against the catalogue.

A pod names its model with the annotation ``hetsched.io/model``, which may only be a key of the
model-feature catalogue (:mod:`hetsched.tail.catalog`). The value is checked for shape (short,
safe characters) before it is looked up, and it is only ever looked up: a URL, a path or a file
name is just an unknown key. Callers turn :class:`UnknownModelError` into the documented fallback
(the extender answers neutral scores and counts the miss by its ``reason``).

``hetsched.io/input-shape`` (e.g. ``1,3,224,224``) is optional; if given it must equal the shape
the catalogue entry was counted at, since FLOPs depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from hetsched.core.errors import HetschedError
from hetsched.tail.catalog import ModelCatalog, default_catalog, is_model_key
from hetsched.tail.flops import ModelFeatures

MODEL_ANNOTATION = "hetsched.io/model"
SHAPE_ANNOTATION = "hetsched.io/input-shape"
MissReason = Literal["missing", "invalid", "unknown", "shape"]


class UnknownModelError(HetschedError):
    """A pod whose model cannot be looked up; ``reason`` is one of :data:`MissReason`."""

    def __init__(self, message: str, reason: MissReason) -> None:
        super().__init__(message)
        self.reason: MissReason = reason


def parse_shape(text: str) -> tuple[int, ...]:
    """Parses ``"1,3,224,224"`` into a tuple, rejecting anything else clearly."""
    try:
        shape = tuple(int(part) for part in text.split(",", 8))
    except ValueError:
        raise HetschedError(
            f"bad input shape {text[:40]!r}: expected integers like 1,3,224,224"
        ) from None
    if not shape or min(shape) <= 0:
        raise HetschedError(f"bad input shape {text[:40]!r}: dimensions must be positive")
    return shape


def model_key_from_annotations(annotations: Mapping[str, Any]) -> str:
    """The catalogue key a pod's annotations name; :class:`UnknownModelError` if none or bad."""
    ref = annotations.get(MODEL_ANNOTATION)
    if not ref:
        raise UnknownModelError(f"the pod has no {MODEL_ANNOTATION} annotation", "missing")
    if not isinstance(ref, str) or not is_model_key(ref):
        raise UnknownModelError(
            f"{MODEL_ANNOTATION} must be a catalogue key (a-z, 0-9, '.-_', <= 63 chars)",
            "invalid",
        )
    return ref


def features_for_annotations(
    annotations: Mapping[str, Any], catalog: ModelCatalog
) -> ModelFeatures:
    """The catalogue's features for the model a pod's annotations name, shape checked."""
    key = model_key_from_annotations(annotations)
    features = catalog.features(key)
    if features is None:
        raise UnknownModelError(f"model {key!r} is not in the catalogue", "unknown")
    shape_text = annotations.get(SHAPE_ANNOTATION)
    if shape_text:
        try:
            shape = parse_shape(str(shape_text))
        except HetschedError as error:
            raise UnknownModelError(str(error), "shape") from None
        counted = catalog.models[key].input_shape
        if shape != counted:
            raise UnknownModelError(
                f"model {key!r} was counted at input shape {counted}, the pod says {shape}",
                "shape",
            )
    return features


def manifest_model_ref(pod: Mapping[str, Any]) -> tuple[str, tuple[int, ...] | None]:
    """The catalogue key and optional input shape a pod manifest names."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    shape = annotations.get(SHAPE_ANNOTATION)
    return model_key_from_annotations(annotations), parse_shape(shape) if shape else None


def resolve_model_features(
    key: str, input_shape: tuple[int, ...] | None = None, catalog: ModelCatalog | None = None
) -> ModelFeatures:
    """Features of catalogue key ``key`` (the built-in catalogue unless ``catalog`` is given)."""
    annotations: dict[str, str] = {MODEL_ANNOTATION: key}
    if input_shape is not None:
        annotations[SHAPE_ANNOTATION] = ",".join(map(str, input_shape))
    return features_for_annotations(annotations, catalog or default_catalog())
