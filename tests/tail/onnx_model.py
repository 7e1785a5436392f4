"""A tiny ONNX graph whose eqs. 1-5 counts are known by hand (flops and catalogue tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny_onnx(path: Path) -> None:
    """Conv (groups 2) → Relu → MaxPool → GlobalAveragePool → Flatten → MatMul, input 1x4x8x8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(8, 2, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.normal(size=(8, 5)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [w, fc],
    )
    onnx.save(helper.make_model(graph), str(path))
