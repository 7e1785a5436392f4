"""Energy meters and readers: NVML and RAPL through fakes, the power-model fallback here."""

from __future__ import annotations

import sys
import time

import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.energy import (
    NvmlEnergyMeter,
    PowerModelMeter,
    RaplEnergyMeter,
    RaplUnavailableError,
    best_meter,
)
from hetsched.core.nvml import NVML_MIN_READ_INTERVAL_S, NvmlUnavailableError
from hetsched.core.utilization import MIN_INTERVAL_S, CpuUtilization, NvmlUtilization
from tests.slim.live.fakes import FakePynvml, rapl_tree, set_rapl

CPU = DEVICES["cpu"]


class FixedUtilization:
    source = "fixed"

    def __init__(self, pct: float | None) -> None:
        self.pct = pct

    def utilization_pct(self) -> float | None:
        return self.pct


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakePynvml:
    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_nvml_meter_reads_millijoules_as_joules(fake_nvml: FakePynvml) -> None:
    meter = NvmlEnergyMeter(0)
    assert meter.source == "nvml" and "NVML" in meter.explanation
    # Each read advances the fake counter by 500 mJ: creation read one, this read another.
    assert meter.energy_j() == pytest.approx(0.5)
    time.sleep(meter.min_read_interval_s)
    assert meter.power_w() > 0


def test_nvml_reads_are_throttled(fake_nvml: FakePynvml, monkeypatch) -> None:
    """Telemetry asks for power and utilisation at every segment completion; the driver is
    called at most once per NVML_MIN_READ_INTERVAL_S per figure, the value held in between."""
    clock = [100.0]
    monkeypatch.setattr("hetsched.core.energy.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("hetsched.core.utilization.time.monotonic", lambda: clock[0])
    meter, reader = NvmlEnergyMeter(0), NvmlUtilization(0)
    energy_reads = fake_nvml.reads["energy"]  # the constructor's probe and first reading
    assert reader.utilization_pct() == 37.0 and fake_nvml.reads["utilization"] == 1
    clock[0] += 2 * NVML_MIN_READ_INTERVAL_S
    first_w = meter.power_w()
    assert first_w == pytest.approx(0.5 / (2 * NVML_MIN_READ_INTERVAL_S))
    for _ in range(100):
        clock[0] += NVML_MIN_READ_INTERVAL_S / 400
        assert meter.power_w() == first_w and reader.utilization_pct() == 37.0
    assert fake_nvml.reads == {"energy": energy_reads + 1, "utilization": 2}
    clock[0] += NVML_MIN_READ_INTERVAL_S
    assert meter.power_w() == pytest.approx(0.5 / (1.25 * NVML_MIN_READ_INTERVAL_S))
    reader.utilization_pct()
    assert fake_nvml.reads == {"energy": energy_reads + 2, "utilization": 3}


def test_nvml_maps_cuda_visible_devices(fake_nvml: FakePynvml, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc, 0")
    NvmlUtilization(0)
    NvmlUtilization(1)
    assert fake_nvml.handles == [("uuid", "GPU-abc"), ("index", 0)]
    with pytest.raises(NvmlUnavailableError, match="CUDA_VISIBLE_DEVICES"):
        NvmlUtilization(2)


def test_nvml_utilization(fake_nvml: FakePynvml) -> None:
    reader = NvmlUtilization(0)
    assert reader.utilization_pct() == 37.0 and reader.source == "nvml"


def test_best_meter_prefers_nvml_on_cuda_and_falls_back_with_the_reason(
    fake_nvml: FakePynvml,
) -> None:
    assert best_meter("cuda:0", DEVICES["t4"], FixedUtilization(50.0)).source == "nvml"
    fake_nvml.energy_supported = False
    meter = best_meter("cuda:0", DEVICES["t4"], FixedUtilization(50.0))
    assert meter.source == "power-model"
    assert "no total-energy counter on cuda:0: Not Supported" in meter.explanation
    meter = best_meter("cuda:1", DEVICES["t4"], FixedUtilization(50.0))
    assert meter.source == "power-model" and "index 1" in meter.explanation


def test_rapl_sums_packages_ignores_subzones_and_unwraps(tmp_path) -> None:
    root = rapl_tree(tmp_path, {0: (900, 1000), 1: (100, 10_000)})
    meter = RaplEnergyMeter(root)
    assert meter.source == "rapl" and "intel-rapl:0, intel-rapl:1" in meter.explanation
    set_rapl(root, 0, 50)  # wrapped: 900 -> 1000 -> 50 is 150 µJ
    set_rapl(root, 1, 400)  # 300 µJ
    assert meter.energy_j() == pytest.approx(450e-6)
    set_rapl(root, 0, 850)  # 800 µJ more, no wrap
    assert meter.energy_j() == pytest.approx(1250e-6)


def test_rapl_unavailable_without_a_readable_package(tmp_path) -> None:
    with pytest.raises(RaplUnavailableError, match="no RAPL package zone"):
        RaplEnergyMeter(tmp_path)
    (tmp_path / "intel-rapl:0").mkdir()  # a zone whose counter cannot be read
    with pytest.raises(RaplUnavailableError, match="not readable"):
        RaplEnergyMeter(tmp_path)


def test_best_meter_on_cpu_uses_rapl_where_readable(tmp_path) -> None:
    root = rapl_tree(tmp_path / "powercap", {0: (0, 2**32)})
    assert best_meter("cpu", CPU, FixedUtilization(0.0), powercap_root=root).source == "rapl"


def test_power_model_fallback_names_its_source_and_integrates_the_model(tmp_path) -> None:
    meter = best_meter("cpu", CPU, FixedUtilization(50.0), powercap_root=tmp_path / "none")
    assert isinstance(meter, PowerModelMeter)
    assert meter.source == "power-model"
    assert "ESTIMATED" in meter.explanation and "no RAPL package zone" in meter.explanation
    assert "10 W idle to 35 W" in meter.explanation
    time.sleep(0.05)
    # 10 W + (35 - 10) W x 0.5 = 22.5 W, whatever the interval.
    assert meter.power_w() == pytest.approx(22.5, rel=0.02)
    assert meter.energy_j() == pytest.approx(22.5 * 0.05, rel=0.5)
    assert meter.power_at(100.0) == CPU.max_power_w
    assert meter.power_at(150.0) == CPU.max_power_w and meter.power_at(-5) == CPU.idle_power_w


def test_power_model_counts_no_sample_as_idle() -> None:
    meter = PowerModelMeter(CPU, FixedUtilization(None))
    time.sleep(0.02)
    assert meter.power_w() == pytest.approx(CPU.idle_power_w, rel=0.02)


def test_cpu_utilization_of_this_process_follows_its_work() -> None:
    reader = CpuUtilization("process")
    assert reader.source == "psutil-process"
    end = time.monotonic() + 0.2
    while time.monotonic() < end:
        pass
    busy = reader.utilization_pct()
    time.sleep(0.2)
    idle = reader.utilization_pct()
    assert busy is not None and idle is not None
    assert busy > idle + 2  # a small margin: on a loaded shared machine the spin gets few cycles
    assert 0.0 <= idle <= 100.0 and 0.0 <= busy <= 100.0
    eager = CpuUtilization("process", min_interval_s=0.0)  # the profile's: reads every window
    time.sleep(0.01)
    assert eager.utilization_pct() is not None
    system = CpuUtilization("system")
    assert system.utilization_pct() is None  # no interval yet: no reading
    time.sleep(MIN_INTERVAL_S)
    assert 0.0 <= system.utilization_pct() <= 100.0
