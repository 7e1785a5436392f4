"""Eqs. 1-5 and the size definition on hand-made layers, torch (FlopCounterMode) and ONNX."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hetsched.core.errors import HetschedError
from hetsched.tail.flops import onnx_features, torch_features
from hetsched.tail.models import resolve_model_features
from tests.tail.onnx_model import write_tiny_onnx


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


class FunctionalConv(nn.Module):
    """A convolution called as ``F.conv2d``: a module hook sees no Conv2d here."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(8, 4, 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.relu(nn.functional.conv2d(x, self.weight, padding=1))


def test_flop_counter_mode_on_layers_a_hook_counter_got_wrong():
    """Known counts (issue 16): transposed conv, functional conv, depthwise, Transformer."""
    # ConvTranspose2d(4→8, k3, s2) on 8x8: every input pixel meets every kernel tap once:
    # 2·IC·OC·K²·IH·IW (a hook counting the 17x17 output as if it were a conv's was 3.1x high).
    convt = torch_features("t", nn.ConvTranspose2d(4, 8, 3, stride=2, bias=False), (1, 4, 8, 8))
    assert convt.conv_flops == 2 * 4 * 8 * 9 * 64
    functional = torch_features("f", FunctionalConv(), (1, 4, 8, 8))
    assert functional.conv_flops == 2 * 4 * 8 * 9 * 64 and functional.activation_flops == 8 * 64
    depthwise = torch_features("d", nn.Conv2d(8, 8, 3, padding=1, groups=8), (1, 8, 8, 8))
    assert depthwise.conv_flops == 2 * 1 * 8 * 9 * 64
    layers, length, width, ff = 2, 5, 16, 32
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, 2, ff, batch_first=True),
        layers,
        enable_nested_tensor=False,
    )
    counted = torch_features("enc", encoder, (1, length, width))
    per_layer = (
        2 * length * width * 3 * width  # Q, K, V projections
        + 2 * length * length * width * 2  # QKᵀ and AV over both heads
        + 2 * length * width * width  # output projection
        + 2 * 2 * length * width * ff  # the two feed-forward layers
    )
    assert counted.dense_flops == layers * per_layer
    assert counted.activation_flops == layers * length * ff  # the feed-forward ReLU
    assert torch.backends.mha.get_fastpath_enabled()  # switched off for the count only


def test_a_model_that_cannot_run_is_a_data_error():
    with pytest.raises(HetschedError, match="cannot run the model"):
        torch_features("bad", nn.Linear(3, 2), (1, 5))


def test_resnet50_size_matches_table_ii():
    assert resolve_model_features("resnet50").size_mb == pytest.approx(97.66, abs=0.1)


def test_onnx_counts_match_the_hand_formulas(tmp_path):
    import onnx

    path = tmp_path / "m.onnx"
    write_tiny_onnx(path)
    f = onnx_features("m", onnx.load(str(path)))
    assert f.conv_flops == 2 * 4 * 8 * 9 * 64 // 2
    assert f.activation_flops == 8 * 64
    assert f.pooling_flops == 8 * 16 + 8
    assert f.dense_flops == 2 * 8 * 5
    assert f.size_mb == pytest.approx((8 * 2 * 9 + 40) * 4 / 2**20)
