"""Resolves a model reference from a deployment manifest (zoo name, file path or URL) to features.

A pod asks for a model with the annotation ``hetsched.io/model``: a zoo name such as ``resnet50``, a
path to an ``.onnx`` file or to a whole module saved with ``torch.save`` (``.pt``), or an
``http(s)://`` / ``file://`` URL to one; and,
for ``.pt`` files, ``hetsched.io/input-shape`` (e.g. ``1,3,224,224``). Anything unreadable or of
an unsupported kind raises :class:`HetschedError` with the reference in the message.
"""

from __future__ import annotations

import tempfile
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.flops import ModelFeatures

MODEL_ANNOTATION = "hetsched.io/model"
SHAPE_ANNOTATION = "hetsched.io/input-shape"
URL_TIMEOUT_S = 5.0


def parse_shape(text: str) -> tuple[int, ...]:
    """Parses ``"1,3,224,224"`` into a tuple, rejecting anything else clearly."""
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise HetschedError(
            f"bad input shape {text!r}: expected integers like 1,3,224,224"
        ) from None
    if not shape or min(shape) <= 0:
        raise HetschedError(f"bad input shape {text!r}: dimensions must be positive")
    return shape


def _fetch(url: str) -> Path:
    suffix = Path(urllib.request.url2pathname(url.split("?")[0])).suffix
    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT_S) as response:
            data = response.read()
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise HetschedError(f"cannot fetch model {url}: {error}") from error
    with tempfile.NamedTemporaryFile(suffix=suffix, delete=False) as handle:
        handle.write(data)
    return Path(handle.name)


def _file_features(ref: str, path: Path, input_shape: tuple[int, ...] | None) -> ModelFeatures:
    if not path.is_file():
        raise HetschedError(f"model {ref!r}: no such file {path}")
    if path.suffix == ".onnx":
        import onnx

        from hetsched.tail.flops import onnx_features

        try:
            proto = onnx.load(str(path))
        except Exception as error:  # protobuf decode errors have private types
            raise DataError(f"model {ref!r} is not a readable ONNX file: {error}") from error
        return onnx_features(ref, proto)
    if path.suffix in (".pt", ".pth"):
        import torch

        from hetsched.tail.flops import torch_features

        if input_shape is None:
            raise HetschedError(f"model {ref!r}: a torch file needs {SHAPE_ANNOTATION}")
        try:
            # A whole pickled module (torch.save(model)): unpickling runs code; trusted files only.
            module = torch.load(str(path), map_location="cpu", weights_only=False)
        except Exception as error:  # torch raises RuntimeError or pickling errors
            raise DataError(f"model {ref!r} is not a readable torch file: {error}") from error
        if not isinstance(module, torch.nn.Module) or isinstance(module, torch.jit.ScriptModule):
            raise DataError(f"model {ref!r}: expected a pickled nn.Module (torch.save(model))")
        return torch_features(ref, module, input_shape)
    raise HetschedError(f"model {ref!r}: unsupported kind {path.suffix!r} (use .onnx or .pt)")


@lru_cache(maxsize=64)
def resolve_model_features(ref: str, input_shape: tuple[int, ...] | None = None) -> ModelFeatures:
    """Features (eqs. 1-5, size) of a zoo name, file path or URL; cached: models are static."""
    from hetsched.tail.zoo import MODELS

    if ref in MODELS:
        from hetsched.tail.flops import torch_features
        from hetsched.tail.zoo import build_model

        model, shape = build_model(ref)
        return torch_features(ref, model, input_shape or shape)
    if "://" in ref:
        return _file_features(ref, _fetch(ref), input_shape)
    if "/" in ref or "." in ref:
        return _file_features(ref, Path(ref), input_shape)
    known = ", ".join(MODELS.names())
    raise HetschedError(f"unknown model {ref!r}: not a zoo name ({known}), file or URL")


def manifest_model_ref(pod: dict) -> tuple[str, tuple[int, ...] | None]:
    """Reads the model reference (and optional input shape) from a pod manifest's annotations."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    ref = annotations.get(MODEL_ANNOTATION)
    if not ref:
        name = (pod.get("metadata") or {}).get("name", "?")
        raise HetschedError(f"pod {name!r} has no {MODEL_ANNOTATION} annotation")
    shape = annotations.get(SHAPE_ANNOTATION)
    return ref, parse_shape(shape) if shape else None
