"""Eqs. 1-5 and the size definition on hand-made layers, torch and ONNX, and model references."""

from __future__ import annotations

import http.server
import threading

import numpy as np
import pytest
import torch
from torch import nn

from hetsched.core.errors import HetschedError
from hetsched.tail.flops import flop_counter_reference, onnx_features, torch_features
from hetsched.tail.models import manifest_model_ref, resolve_model_features


def test_conv_formula_eq1_with_groups():
    # 2·IC·OC·KH·KW·OH·OW / groups; 8x8 output with padding 1
    plain = torch_features("c", nn.Conv2d(4, 8, 3, padding=1, bias=False), (1, 4, 8, 8))
    assert plain.conv_flops == 2 * 4 * 8 * 3 * 3 * 8 * 8
    grouped = torch_features("g", nn.Conv2d(4, 8, 3, padding=1, groups=2), (1, 4, 8, 8))
    assert grouped.conv_flops == 2 * 4 * 8 * 3 * 3 * 8 * 8 // 2
    strided = torch_features("s", nn.Conv2d(3, 5, 3, stride=2), (1, 3, 9, 9))  # 4x4 out
    assert strided.conv_flops == 2 * 3 * 5 * 9 * 16


def test_dense_activation_pooling_eqs_2_to_5():
    model = nn.Sequential(
        nn.Conv2d(2, 4, 1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 3 * 3, 7),
        nn.Sigmoid(),
    )
    f = torch_features("m", model, (1, 2, 6, 6))
    assert f.conv_flops == 2 * 2 * 4 * 1 * 36
    assert f.activation_flops == 4 * 36 + 7  # eq. 3: one per neuron
    assert f.pooling_flops == 3 * 3 * 4  # eq. 4: H·W·C of the output
    assert f.dense_flops == 2 * 36 * 7  # eq. 2
    assert f.flops == f.conv_flops + f.activation_flops + f.pooling_flops + f.dense_flops  # eq. 5
    params = 2 * 4 + 4 + 36 * 7 + 7
    assert f.size_mb == pytest.approx(params * 4 / 2**20)


@pytest.mark.parametrize("name", ["cnn-s", "resnet18ish"])
def test_conv_and_dense_match_torch_flop_counter(name):
    from hetsched.tail.zoo import build_model

    model, shape = build_model(name)
    f = torch_features(name, model, shape)
    assert f.conv_flops + f.dense_flops == flop_counter_reference(model, shape)


def test_resnet50_size_matches_table_ii():
    assert resolve_model_features("resnet50").size_mb == pytest.approx(97.66, abs=0.1)


def _onnx_model(path):
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


def test_onnx_counts_match_the_hand_formulas(tmp_path):
    path = tmp_path / "m.onnx"
    _onnx_model(path)
    f = resolve_model_features(str(path))
    assert f.conv_flops == 2 * 4 * 8 * 9 * 64 // 2
    assert f.activation_flops == 8 * 64
    assert f.pooling_flops == 8 * 16 + 8
    assert f.dense_flops == 2 * 8 * 5
    assert f.size_mb == pytest.approx((8 * 2 * 9 + 40) * 4 / 2**20)
    import onnx

    assert onnx_features("again", onnx.load(str(path))).flops == f.flops


def test_file_url_and_local_http_server(tmp_path):
    path = tmp_path / "m.onnx"
    _onnx_model(path)
    assert resolve_model_features(path.as_uri()).conv_flops == 2 * 4 * 8 * 9 * 64 // 2

    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(tmp_path), **k
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert resolve_model_features(f"http://127.0.0.1:{port}/m.onnx").dense_flops == 80
        with pytest.raises(HetschedError, match="cannot fetch model"):
            resolve_model_features(f"http://127.0.0.1:{port}/missing.onnx")
    finally:
        server.shutdown()


def test_bad_references_give_clear_errors(tmp_path):
    with pytest.raises(HetschedError, match="unknown model 'nosuchnet'"):
        resolve_model_features("nosuchnet")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(HetschedError, match="ONNX"):
        resolve_model_features(str(junk))
    with pytest.raises(HetschedError, match="unsupported kind"):
        (tmp_path / "m.h5").write_text("x")
        resolve_model_features(str(tmp_path / "m.h5"))
    with pytest.raises(HetschedError, match="no such file"):
        resolve_model_features(str(tmp_path / "absent.onnx"))
    with pytest.raises(HetschedError, match=r"no hetsched\.io/model"):
        manifest_model_ref({"metadata": {"name": "p"}})


def test_torch_file_with_manifest_shape(tmp_path):
    path = tmp_path / "m.pt"
    torch.save(nn.Sequential(nn.Linear(6, 3), nn.ReLU()), path)
    pod = {
        "metadata": {
            "annotations": {"hetsched.io/model": str(path), "hetsched.io/input-shape": "1,6"}
        }
    }
    ref, shape = manifest_model_ref(pod)
    f = resolve_model_features(ref, shape)
    assert f.dense_flops == 2 * 6 * 3 and f.activation_flops == 3


def test_torchscript_is_rejected_clearly(tmp_path):
    path = tmp_path / "s.pt"
    torch.jit.script(nn.Linear(2, 2)).save(str(path))
    with pytest.raises(HetschedError, match="torch"):
        resolve_model_features(str(path), (1, 2))
