"""Load that keeps growing past 100 % CPU: pressure, run queue and steal from /proc (issue 16).

CPU utilisation (eqs. 6-7's U) is 100 % on every busy node, so it cannot tell a node with one busy
core from one with a run queue of 40. The kernel says more:

- PSI (``/proc/pressure/cpu``, ``/proc/pressure/memory``, Linux >= 4.20 with CONFIG_PSI): the share
  of the last 10 s / 60 s in which some runnable task waited for a CPU (or for memory), in %;
- the run queue: ``procs_running`` of ``/proc/stat`` (now) and the 1-minute load average of
  ``/proc/loadavg``, both divided by the node's cores;
- steal: the share of CPU time a hypervisor gave to other guests (``/proc/stat``'s 8th cpu
  column), which no utilisation inside the VM shows, over a window of two reads.

The files are input from outside: each parser checks the shape and the numbers (finite, in range)
and raises :class:`~hetsched.core.errors.DataError` with one line on anything else.
:func:`read_contention` never raises: a file that is missing (PSI is absent on older kernels and
some containers) or malformed leaves its features None and says why in ``absent``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hetsched.core.errors import DataError

# /proc/stat's cpu line: user nice system idle iowait irq softirq steal [guest guest_nice]
STEAL_COLUMN = 7
MAX_PROC_BYTES = 1 << 20  # /proc/stat of a 1,000-core node is ~100 KiB


def _number(text: str, what: str, low: float = 0.0, high: float = math.inf) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{what}: not a number: {text[:20]!r}") from None
    if not low <= value <= high:  # NaN fails here too
        raise DataError(f"{what}: {value} outside [{low}, {high}]")
    return value


def parse_psi(text: str) -> dict[str, float]:
    """``some``/``full`` lines of a PSI file as ``{"some_avg10": %, "some_avg60": %, ...}``."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, _, rest = line.strip().partition(" ")
        if kind not in ("some", "full"):
            continue
        for field in rest.split():
            key, sep, value = field.partition("=")
            if not sep:
                raise DataError(f"PSI: malformed field {field[:20]!r}")
            if key in ("avg10", "avg60", "avg300"):
                out[f"{kind}_{key}"] = _number(value, f"PSI {kind} {key}", 0.0, 100.0)
    if "some_avg10" not in out or "some_avg60" not in out:
        raise DataError("PSI: no 'some avg10=.. avg60=..' line")
    return out


def parse_loadavg(text: str) -> tuple[float, int]:
    """(1-minute load average, runnable tasks now) from ``/proc/loadavg``."""
    parts = text.split()
    if len(parts) < 4 or "/" not in parts[3]:
        raise DataError("loadavg: expected 'load1 load5 load15 running/total last_pid'")
    load1 = _number(parts[0], "loadavg load1", 0.0, 1e7)
    running = _number(parts[3].split("/")[0], "loadavg running", 0.0, 1e9)
    return load1, int(running)


@dataclass(frozen=True)
class StatSample:
    """What one read of ``/proc/stat`` gives: total and steal ticks of the ``cpu`` line, and the
    runnable tasks now."""

    total_ticks: float
    steal_ticks: float
    procs_running: int


def parse_stat(text: str) -> StatSample:
    """The aggregate ``cpu`` line and ``procs_running`` of ``/proc/stat``."""
    total = steal = running = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            ticks = [_number(v, "stat cpu column", 0.0, 1e18) for v in parts[1:11]]
            if len(ticks) < 4:
                raise DataError("stat: the cpu line has fewer than 4 columns")
            total = sum(ticks[:8])  # guest time is already counted in user and nice
            steal = ticks[STEAL_COLUMN] if len(ticks) > STEAL_COLUMN else 0.0
        elif parts[0] == "procs_running" and len(parts) == 2:
            running = int(_number(parts[1], "stat procs_running", 0.0, 1e9))
    if total is None or steal is None or running is None:
        raise DataError("stat: no aggregate cpu line or no procs_running")
    return StatSample(total, steal, running)


def steal_fraction(before: StatSample, after: StatSample) -> float:
    """Share of the CPU time between two reads that the hypervisor gave to other guests."""
    total = after.total_ticks - before.total_ticks
    if total <= 0:
        raise DataError("stat: no CPU time passed between the two reads")
    return min(max((after.steal_ticks - before.steal_ticks) / total, 0.0), 1.0)


@dataclass(frozen=True)
class Contention:
    """A node's contention features; None where this kernel does not provide one (``absent``
    says which and why)."""

    psi_cpu_some_avg10: float | None = None
    psi_cpu_some_avg60: float | None = None
    psi_memory_some_avg10: float | None = None
    runq_per_core: float | None = None
    load1_per_core: float | None = None
    steal_fraction: float | None = None
    absent: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {**asdict(self), "absent": list(self.absent)}


def _read(path: Path) -> str:
    with open(path, encoding="ascii", errors="replace") as handle:
        return handle.read(MAX_PROC_BYTES)


def read_contention(cores: int, proc: Path = Path("/proc"), window_s: float = 0.1) -> Contention:
    """The node's :class:`Contention` from ``proc`` (a folder laid out as /proc; tests pass
    fixtures); ``window_s`` separates the two ``/proc/stat`` reads of the steal share."""
    if cores < 1:
        raise DataError(f"cores must be >= 1, got {cores}")
    found: dict[str, float] = {}
    absent: list[str] = []
    for resource in ("cpu", "memory"):
        try:
            psi = parse_psi(_read(proc / "pressure" / resource))
        except (OSError, DataError) as error:
            absent.append(f"psi_{resource}: {error}")
            continue
        found[f"psi_{resource}_some_avg10"] = psi["some_avg10"]
        if resource == "cpu":
            found["psi_cpu_some_avg60"] = psi["some_avg60"]
    try:
        load1, _ = parse_loadavg(_read(proc / "loadavg"))
        found["load1_per_core"] = load1 / cores
    except (OSError, DataError) as error:
        absent.append(f"loadavg: {error}")
    try:
        before = parse_stat(_read(proc / "stat"))
        found["runq_per_core"] = before.procs_running / cores
        time.sleep(window_s)
        found["steal_fraction"] = steal_fraction(before, parse_stat(_read(proc / "stat")))
    except (OSError, DataError) as error:
        absent.append(f"stat: {error}")
    return Contention(
        psi_cpu_some_avg10=found.get("psi_cpu_some_avg10"),
        psi_cpu_some_avg60=found.get("psi_cpu_some_avg60"),
        psi_memory_some_avg10=found.get("psi_memory_some_avg10"),
        runq_per_core=found.get("runq_per_core"),
        load1_per_core=found.get("load1_per_core"),
        steal_fraction=found.get("steal_fraction"),
        absent=tuple(absent),
    )
