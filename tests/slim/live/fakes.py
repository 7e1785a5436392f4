"""Stand-ins for what this machine lacks: an NVML library and a RAPL powercap tree."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


class FakeNvmlError(Exception):
    """Plays pynvml.NVMLError."""


class FakePynvml:
    """A pynvml module (its camelCase names) with one GPU whose energy counter advances
    ``mj_per_read`` per read."""

    NVMLError = FakeNvmlError

    def __init__(self, mj_per_read: int = 500, energy_supported: bool = True) -> None:
        self.energy_mj = 1_000_000
        self.mj_per_read = mj_per_read
        self.energy_supported = energy_supported
        self.handles: list[object] = []
        self.reads = {"energy": 0, "utilization": 0}
        """Driver calls per figure (a real one costs milliseconds on a virtual machine)."""

    def nvmlInit(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:  # noqa: N802
        if index != 0:
            raise FakeNvmlError(f"Invalid Argument (index {index})")
        self.handles.append(("index", index))
        return self.handles[-1]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:  # noqa: N802
        self.handles.append(("uuid", uuid))
        return self.handles[-1]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:  # noqa: N802
        if not self.energy_supported:
            raise FakeNvmlError("Not Supported")
        self.reads["energy"] += 1
        self.energy_mj += self.mj_per_read
        return self.energy_mj

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> SimpleNamespace:  # noqa: N802
        self.reads["utilization"] += 1
        return SimpleNamespace(gpu=37, memory=12)


def rapl_tree(root: Path, packages: dict[int, tuple[int, int]]) -> Path:
    """A powercap folder with package zones ``{index: (energy_uj, max_energy_range_uj)}`` and a
    DRAM sub-zone under each (which a meter must not add: it is part of the package)."""
    for index, (energy_uj, range_uj) in packages.items():
        zone = root / f"intel-rapl:{index}"
        sub = root / f"intel-rapl:{index}:0"
        for folder in (zone, sub):
            folder.mkdir(parents=True)
            (folder / "energy_uj").write_text(f"{energy_uj}\n")
            (folder / "max_energy_range_uj").write_text(f"{range_uj}\n")
    return root


def set_rapl(root: Path, index: int, energy_uj: int) -> None:
    (root / f"intel-rapl:{index}" / "energy_uj").write_text(f"{energy_uj}\n")
