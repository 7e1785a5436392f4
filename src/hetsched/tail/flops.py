"""Model features of eqs. 1-5: FLOPs per inference and parameter size, for torch and ONNX.

Counting rules (per sample, batch 1):
  - convolution (eq. 1): 2·IC·OC·KH·KW·OH·OW / groups. The paper's formula has no groups term; a
    grouped (or depthwise) convolution only connects IC/groups input channels to each output, so we
    divide by groups, which is also what ``torch.utils.flop_counter`` counts.
  - dense (eq. 2): 2·Nin·Nout (one multiply and one add per weight; bias not counted).
  - activation (eq. 3): one FLOP per output neuron (ReLU, Sigmoid, Tanh, GELU, SiLU, ...).
  - pooling (eq. 4): H·W·C of the output (max / average / adaptive / global pooling).
  - total (eq. 5): the sum over layers. Batch-norm, residual adds and resizes are not among the
    paper's layer types and are not counted.

Size: "MB" here is MiB (2**20 bytes) of parameter and buffer storage, e.g. ResNet-50 in float32 is
97.7 MiB, matching the paper's Table II (97.66 MB).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

BYTES_PER_MB = 2**20

ACTIVATIONS = (
    nn.ReLU,
    nn.ReLU6,
    nn.Sigmoid,
    nn.Tanh,
    nn.GELU,
    nn.SiLU,
    nn.LeakyReLU,
    nn.ELU,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.Softmax,
)
POOLINGS = (
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AvgPool3d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
)
ONNX_ACTIVATIONS = {
    "Relu",
    "Sigmoid",
    "Tanh",
    "Gelu",
    "LeakyRelu",
    "Elu",
    "HardSwish",
    "HardSigmoid",
    "Softmax",
    "Clip",
}
ONNX_POOLINGS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}


@dataclass(frozen=True)
class ModelFeatures:
    """The model half of the regressor's input (eq. 14): FLOPs by eq. 5 and size in MiB."""

    name: str
    flops: int
    size_mb: float
    conv_flops: int
    dense_flops: int
    activation_flops: int
    pooling_flops: int

    def as_dict(self) -> dict:
        return asdict(self)


def conv_flops(in_ch: int, out_ch: int, kh: int, kw: int, oh: int, ow: int, groups: int = 1) -> int:
    """Eq. 1, divided by groups (see the module docstring)."""
    return 2 * in_ch * out_ch * kh * kw * oh * ow // groups


def dense_flops(n_in: int, n_out: int) -> int:
    """Eq. 2."""
    return 2 * n_in * n_out


def _numel_per_sample(shape) -> int:
    return math.prod(int(d) for d in shape[1:])


def torch_features(name: str, model: nn.Module, input_shape: tuple[int, ...]) -> ModelFeatures:
    """Counts eqs. 1-5 with forward hooks on one batch-1 forward pass of ``model``."""
    totals = {"conv": 0, "dense": 0, "act": 0, "pool": 0}

    def hook(module: nn.Module, inputs, output) -> None:
        if isinstance(module, nn.modules.conv._ConvNd):
            kernel = math.prod(module.kernel_size)
            spatial = math.prod(output.shape[2:])
            # eq. 1 generalised to any spatial rank: 2·IC·OC·prod(K)·prod(O) / groups
            totals["conv"] += (
                2 * module.in_channels * module.out_channels * kernel * spatial // module.groups
            )
        elif isinstance(module, nn.Linear):
            rows = math.prod(output.shape[1:-1])  # tokens per sample for 3-D inputs
            totals["dense"] += rows * dense_flops(module.in_features, module.out_features)
        elif isinstance(module, ACTIVATIONS):
            totals["act"] += _numel_per_sample(output.shape)  # eq. 3
        elif isinstance(module, POOLINGS):
            totals["pool"] += _numel_per_sample(output.shape)  # eq. 4: H·W·C of the output

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(input_shape))
    finally:
        for h in handles:
            h.remove()
    size_bytes = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    return ModelFeatures(
        name=name,
        flops=sum(totals.values()),  # eq. 5
        size_mb=size_bytes / BYTES_PER_MB,
        conv_flops=totals["conv"],
        dense_flops=totals["dense"],
        activation_flops=totals["act"],
        pooling_flops=totals["pool"],
    )


def onnx_features(name: str, model_proto) -> ModelFeatures:
    """Counts eqs. 1-5 on an ONNX graph after shape inference (static input shapes needed)."""
    import onnx
    from onnx import numpy_helper

    from hetsched.core.errors import DataError

    try:
        inferred = onnx.shape_inference.infer_shapes(model_proto)
    except Exception as error:  # onnx raises several private types
        raise DataError(f"ONNX shape inference failed for {name}: {error}") from error
    graph = inferred.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    shapes: dict[str, list[int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else 0 for d in dims]
    for key, arr in inits.items():
        shapes[key] = list(arr.shape)

    def out_shape(node) -> list[int]:
        shape = shapes.get(node.output[0])
        if not shape or 0 in shape[1:]:
            raise DataError(f"{name}: no static shape for output of {node.op_type} {node.name!r}")
        return shape

    totals = {"conv": 0, "dense": 0, "act": 0, "pool": 0}
    for node in graph.node:
        op = node.op_type
        if op == "Conv":
            oc, ic_per_group, *kernel = shapes[node.input[1]]
            # eq. 1 / groups: IC = ic_per_group·groups, so 2·IC·OC·K·O/groups = 2·(IC/g)·OC·K·O
            totals["conv"] += (
                2 * ic_per_group * oc * math.prod(kernel) * math.prod(out_shape(node)[2:])
            )
        elif op in ("Gemm", "MatMul") and node.input[1] in inits:
            w = shapes[node.input[1]]
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            n_in, n_out = (w[1], w[0]) if (op == "Gemm" and trans_b) else (w[0], w[1])
            rows = math.prod(out_shape(node)[1:-1])
            totals["dense"] += rows * dense_flops(n_in, n_out)
        elif op in ONNX_ACTIVATIONS:
            totals["act"] += _numel_per_sample(out_shape(node))
        elif op in ONNX_POOLINGS:
            totals["pool"] += _numel_per_sample(out_shape(node))
    size_bytes = sum(a.nbytes for a in inits.values())
    return ModelFeatures(
        name=name,
        flops=sum(totals.values()),
        size_mb=size_bytes / BYTES_PER_MB,
        conv_flops=totals["conv"],
        dense_flops=totals["dense"],
        activation_flops=totals["act"],
        pooling_flops=totals["pool"],
    )


def flop_counter_reference(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """FLOPs of conv and dense layers by torch's own ``FlopCounterMode`` (the cross-check)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.eval()(torch.zeros(input_shape))
    counts = counter.get_flop_counts().get("Global", {})
    ops = torch.ops.aten
    keep = {ops.convolution, ops.mm, ops.addmm, ops.bmm, ops._convolution}
    return int(sum(v for k, v in counts.items() if k in keep))
