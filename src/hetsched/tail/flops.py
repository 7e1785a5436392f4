"""Model features of eqs. 1-5: FLOPs per inference and parameter size, for torch and ONNX.

Torch models are counted by running one batch-1 forward pass under torch's own
``torch.utils.flop_counter.FlopCounterMode``, which sees every aten operator the model calls: a
functional ``F.conv2d``, a ``ConvTranspose2d`` or the attention inside a ``TransformerEncoder`` are
counted as what they compute, not as what a module hook guesses from the module's class (the hook
counter this replaced was 3.1x high on ConvTranspose2d and missed functional calls; issue 16).

Counting rules (per sample, batch 1), by the operator's kind:
  - convolution (eq. 1): torch's formula, 2·IC·OC·KH·KW·OH·OW / groups for a forward convolution
    (transposed ones count their real work). The paper's formula has no groups term; a grouped or
    depthwise convolution connects IC/groups inputs to each output, so torch divides by groups.
  - dense (eq. 2): matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``) by torch's formula,
    2·Nin·Nout per row, and scaled dot-product attention as its two products (QKᵀ and AV).
  - activation (eq. 3): one FLOP per output element of ReLU, ReLU6 (``hardtanh``), Sigmoid, Tanh,
    GELU, SiLU, LeakyReLU, ELU, Hardswish, Hardsigmoid and Softmax.
  - pooling (eq. 4): H·W·C of the output of max / average / adaptive pooling, and of a ``mean``
    (global average pooling such as ``AdaptiveAvgPool2d(1)`` lowers to it).
  - total (eq. 5): the sum. Batch-norm, layer-norm, residual adds and resizes are not among the
    paper's layer types and are not counted.

The multi-head-attention fast path (one fused ``_transformer_encoder_layer_fwd`` kernel that no
counter can see into) is switched off for the counting pass only.

Size: "MB" here is MiB (2**20 bytes) of parameter and buffer storage, e.g. ResNet-50 in float32 is
97.7 MiB, matching the paper's Table II (97.66 MB).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hetsched.core.errors import DataError

BYTES_PER_MB = 2**20

_aten = torch.ops.aten
CONV_OPS = frozenset({_aten.convolution, _aten._convolution})
DENSE_OPS = frozenset(
    {
        _aten.mm,
        _aten.addmm,
        _aten.bmm,
        _aten.baddbmm,
        _aten._scaled_dot_product_flash_attention_for_cpu,
        _aten._scaled_dot_product_efficient_attention,
        _aten._scaled_dot_product_flash_attention,
        _aten._scaled_dot_product_cudnn_attention,
    }
)
ACTIVATION_OPS = frozenset(
    {
        _aten.relu,
        _aten.relu_,
        _aten.hardtanh,
        _aten.hardtanh_,
        _aten.sigmoid,
        _aten.sigmoid_,
        _aten.tanh,
        _aten.tanh_,
        _aten.gelu,
        _aten.silu,
        _aten.silu_,
        _aten.leaky_relu,
        _aten.leaky_relu_,
        _aten.elu,
        _aten.elu_,
        _aten.hardswish,
        _aten.hardswish_,
        _aten.hardsigmoid,
        _aten.hardsigmoid_,
        _aten._softmax,
    }
)
POOLING_OPS = frozenset(
    {
        _aten.max_pool1d,
        _aten.max_pool2d_with_indices,
        _aten.max_pool3d_with_indices,
        _aten.avg_pool1d,
        _aten.avg_pool2d,
        _aten.avg_pool3d,
        _aten._adaptive_avg_pool2d,
        _aten._adaptive_avg_pool3d,
        _aten.adaptive_max_pool2d,
        _aten.adaptive_max_pool3d,
        _aten.mean,
    }
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


def dense_flops(n_in: int, n_out: int) -> int:
    """Eq. 2."""
    return 2 * n_in * n_out


def _numel_per_sample(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape[1:])


def _output_elements(*args: Any, out_shape: Any, **kwargs: Any) -> int:
    """Eqs. 3-4: one FLOP per output element of the sample (max pooling also returns indices:
    only its values count)."""
    first = out_shape[0] if isinstance(out_shape[0], (tuple, list, torch.Size)) else out_shape
    return _numel_per_sample(first)


def _attention_flops(
    q_shape: Sequence[int],
    k_shape: Sequence[int],
    v_shape: Sequence[int],
    *args: Any,
    **kwargs: Any,
) -> int:
    """QKᵀ and AV of CPU scaled dot-product attention: 2·B·H·L·S·(E + Ev); torch registers the
    same formula for the GPU kernels but not for this CPU one."""
    batch, heads, queries, embed = q_shape
    keys, value_embed = k_shape[-2], v_shape[-1]
    return 2 * batch * heads * queries * keys * (embed + value_embed)


_CUSTOM_FORMULAS: dict[Any, Any] = {
    **dict.fromkeys(ACTIVATION_OPS | POOLING_OPS, _output_elements),
    _aten._scaled_dot_product_flash_attention_for_cpu: _attention_flops,
}


def _counted_forward(model: nn.Module, input_shape: tuple[int, ...]) -> dict[Any, int]:
    """FLOPs by aten operator of one batch-1 forward pass of ``model`` on zeros."""
    counter = FlopCounterMode(display=False, custom_mapping=_CUSTOM_FORMULAS)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), counter:
            model.eval()(torch.zeros(input_shape))
    except (RuntimeError, ValueError, TypeError) as error:
        raise DataError(f"cannot run the model on input shape {input_shape}: {error}") from error
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    return dict(counter.get_flop_counts().get("Global", {}))


def torch_features(name: str, model: nn.Module, input_shape: tuple[int, ...]) -> ModelFeatures:
    """Eqs. 1-5 of ``model`` by ``FlopCounterMode`` (see the module docstring), and its size."""
    counts = _counted_forward(model, input_shape)

    def total(ops: frozenset) -> int:
        return int(sum(v for op, v in counts.items() if op in ops))

    conv, dense = total(CONV_OPS), total(DENSE_OPS)
    activation, pooling = total(ACTIVATION_OPS), total(POOLING_OPS)
    size_bytes = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    return ModelFeatures(
        name=name,
        flops=conv + dense + activation + pooling,  # eq. 5
        size_mb=size_bytes / BYTES_PER_MB,
        conv_flops=conv,
        dense_flops=dense,
        activation_flops=activation,
        pooling_flops=pooling,
    )


def parameter_count(model: nn.Module) -> int:
    """Number of parameters (weights and biases) of ``model``."""
    return sum(p.numel() for p in model.parameters())


def onnx_features(name: str, model_proto: Any) -> ModelFeatures:
    """Counts eqs. 1-5 on an ONNX graph after shape inference (static input shapes needed).

    ONNX graphs cannot run under ``FlopCounterMode``, so the paper's formulas are applied per node:
    eq. 1 (divided by groups) for ``Conv``, eq. 2 for ``Gemm``/``MatMul`` with a constant weight,
    eqs. 3-4 as output elements of the activation and pooling operators listed above.
    """
    import onnx
    from onnx import numpy_helper

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
