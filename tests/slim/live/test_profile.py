"""`hetsched slim profile`: the fit on synthetic cells; the command end to end on a tiny budget."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.devices import DEVICES, load_device
from hetsched.core.errors import HetschedError
from hetsched.slim.live.devices import device_spec_for
from hetsched.slim.live.profile_cells import ProfileCell
from hetsched.slim.live.profile_fit import find_knee, fit_line, fit_profile


def test_fit_line_recovers_overhead_and_rate() -> None:
    flops = np.array([1e6, 1e7, 1e8, 1e9, 4e9])
    latency = 0.0005 + flops / 2e11
    overhead_s, s_per_flop = fit_line(flops, latency)
    assert overhead_s == pytest.approx(0.0005, rel=1e-6)
    assert 1 / s_per_flop == pytest.approx(2e11, rel=1e-6)


def test_fit_line_never_returns_a_negative_overhead() -> None:
    flops = np.array([1e8, 2e8, 4e8])
    latency = np.array([0.0009, 0.002, 0.0041])  # steeper than proportional: intercept < 0
    overhead_s, s_per_flop = fit_line(flops, latency)
    assert overhead_s == 0.0 and s_per_flop > 0


def test_find_knee_finds_a_bend_and_not_a_straight_line() -> None:
    util = np.linspace(40, 100, 13)
    bent = np.where(util <= 85, 1 + 0.001 * (util - 40), 1.045 + 0.08 * (util - 85))
    assert find_knee(util, bent) == pytest.approx(0.85, abs=0.06)
    assert find_knee(util, 1 + 0.002 * (util - 40)) is None
    assert find_knee(util[:4], bent[:4]) is None  # too few cells for two lines


def _cell(flops: float, latency_s: float, util: float | None) -> ProfileCell:
    return ProfileCell(
        0, 1.0, 1, int(flops), latency_s, latency_s, 3, 1, "account", util, "x", 0.1, "y"
    )


def test_fit_profile_raises_a_peak_below_the_measured_rate() -> None:
    cells = [_cell(f, 0.0002 + f / 1e12, None) for f in (1e7, 1e8, 1e9)]
    fit = fit_profile(cells, DEVICES["cpu"], idle_power_w=None)  # datasheet says 0.35 TFLOP/s
    assert fit.peak_tflops == pytest.approx(1.0, rel=1e-3) and fit.achieved_fraction <= 1.0
    assert fit.launch_overhead_s == pytest.approx(0.0002, rel=1e-3)
    assert fit.knee_utilization is None and fit.median_relative_error < 1e-6


def test_profile_command_writes_a_profile_the_simulator_loads(tmp_path, digits_checkpoint) -> None:
    out = tmp_path / "profiles"
    args = ["slim", "profile", "--device", "cpu", "--checkpoint", str(digits_checkpoint)]
    args += ["--batch-sizes", "1,2", "--widths", "0.25,1.0", "--image-size", "8"]
    args += ["--min-time", "0.005", "--passes", "1", "--name", "tiny", "--out", str(out)]
    result = CliRunner().invoke(typer_app, args)
    assert result.exit_code == 0, result.output
    assert "ESTIMATED" in result.output or "RAPL" in result.output  # the energy source is shown
    spec = load_device(out / "tiny.json")
    assert spec.name == "tiny" and spec.kind == "cpu" and spec.source.startswith("profile of cpu")
    data = json.loads((out / "tiny.json").read_text())
    assert len(data["measurements"]) == 4 * 2 * 2  # segments x widths x batch sizes
    assert data["energy"]["source"] in {"power-model", "rapl"}
    assert data["fit"]["launch_overhead_s"] == spec.launch_overhead_s
    cell = data["measurements"][0]
    assert 0 < cell["latency_s"] <= cell["latency_median_s"] and cell["memory_source"] == "account"
    for figure in ("fig1-memory", "fig2-energy", "fig3-latency"):
        png = out / f"tiny-{figure}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "tpu"], "expected cpu, cuda or cuda:N"),
        (["--widths", "0.3"], "not among the model's widths"),
        (["--batch-sizes", "1,x"], "--batch-sizes: expected comma-separated numbers"),
        (["--batch-sizes", "0"], "expected positive integers"),
    ],
)
def test_profile_bad_input_is_one_clear_error(tmp_path, args, message) -> None:
    result = CliRunner().invoke(typer_app, ["slim", "profile", *args, "--out", str(tmp_path)])
    assert isinstance(result.exception, HetschedError)
    assert message in str(result.exception)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a CUDA-less machine")
def test_profile_cuda_without_cuda_is_a_clear_error(tmp_path) -> None:
    args = ["slim", "profile", "--device", "cuda:3", "--out", str(tmp_path)]
    result = CliRunner().invoke(typer_app, args)
    assert isinstance(result.exception, HetschedError)
    assert "'cuda:3': CUDA is not available on this machine" in str(result.exception)


@pytest.mark.parametrize(
    ("gpu_name", "spec_name"),
    [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("Tesla T4", "t4")],
)
def test_live_gpu_names_find_their_datasheet_spec(monkeypatch, gpu_name, spec_name) -> None:
    """The lent H200 had no spec, so profiling it (the way to make one) stopped; the name the
    driver reports picks the spec, with this GPU's memory."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: gpu_name)
    properties = type("Properties", (), {"total_memory": 123 * 2**30})()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties)
    spec = device_spec_for(torch.device("cuda", 0))
    assert spec.name == spec_name and spec.memory_bytes == 123 * 2**30
