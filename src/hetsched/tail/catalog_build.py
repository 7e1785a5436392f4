"""Builds the model-feature catalogue offline, from trusted input only (``hetsched tail catalog``).

Sources are the built-in zoo's names (the model is built from this package's code and counted
with ``FlopCounterMode``) and ONNX files the operator names (``key=path.onnx`` or ``path.onnx``,
keyed by the file's stem). ONNX is a protobuf graph: loading it runs no code, unlike a pickled
torch module, which is not accepted at all. Nothing here is reachable from an HTTP request.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.catalog import CatalogEntry, ModelCatalog, is_model_key
from hetsched.tail.flops import ModelFeatures, onnx_features, parameter_count, torch_features
from hetsched.tail.zoo import MODELS, build_model

ONNX_SUFFIX = ".onnx"


def counter_description() -> str:
    """What counted the FLOPs, recorded in the catalogue so a reader can tell versions apart."""
    return f"torch.utils.flop_counter.FlopCounterMode (torch {torch.__version__}); ONNX: eqs. 1-5"


def _entry(
    features: ModelFeatures, parameters: int, shape: tuple[int, ...], source: str
) -> CatalogEntry:
    return CatalogEntry(
        flops=features.flops,
        size_mb=features.size_mb,
        parameters=parameters,
        conv_flops=features.conv_flops,
        dense_flops=features.dense_flops,
        activation_flops=features.activation_flops,
        pooling_flops=features.pooling_flops,
        input_shape=shape,
        source=source,
    )


def zoo_entry(name: str) -> CatalogEntry:
    """A zoo model counted at its own input shape."""
    model, shape = build_model(name)
    return _entry(torch_features(name, model, shape), parameter_count(model), shape, f"zoo:{name}")


def onnx_entry(key: str, path: Path) -> CatalogEntry:
    """An ONNX file's features (static input shapes needed for shape inference)."""
    import onnx

    if not path.is_file():
        raise DataError("no such ONNX file", path=str(path))
    try:
        proto = onnx.load(str(path))
    except Exception as error:  # protobuf decode errors have private types
        raise DataError(f"not a readable ONNX file: {error}", path=str(path)) from error
    graph = proto.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if not inputs:
        raise DataError("the ONNX graph has no input", path=str(path))
    shape = tuple(d.dim_value for d in inputs[0].type.tensor_type.shape.dim)
    parameters = sum(math.prod(t.dims) for t in graph.initializer)
    return _entry(onnx_features(key, proto), parameters, shape, f"onnx:{path.name}")


def parse_source(spec: str) -> tuple[str, str | Path]:
    """``resnet50`` → (key, zoo name); ``key=m.onnx`` or ``m.onnx`` → (key, path)."""
    key, sep, target = spec.partition("=")
    if not sep:
        target = spec
        key = Path(spec).stem.lower() if spec.endswith(ONNX_SUFFIX) else spec.lower()
    if not is_model_key(key):
        raise HetschedError(
            f"bad catalogue key {key!r}: a-z, 0-9 and '.-_', 1-63 characters (from {spec!r})"
        )
    if target.endswith(ONNX_SUFFIX):
        return key, Path(target)
    if target in MODELS:
        return key, target
    known = ", ".join(MODELS.names())
    raise HetschedError(f"{spec!r} is neither a zoo name ({known}) nor an .onnx file")


def build_catalog(specs: list[str]) -> ModelCatalog:
    """The catalogue of ``specs`` (see :func:`parse_source`); keys must be unique."""
    models: dict[str, CatalogEntry] = {}
    for spec in specs:
        key, target = parse_source(spec)
        if key in models:
            raise HetschedError(f"catalogue key {key!r} given twice")
        models[key] = onnx_entry(key, target) if isinstance(target, Path) else zoo_entry(target)
    return ModelCatalog(counter=counter_description(), models=models)
