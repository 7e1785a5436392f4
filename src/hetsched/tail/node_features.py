"""Node features under contention: eqs. 6-8 from live utilisation (psutil, node_exporter, agent).

  eq. 6  CPU_eff  = CPU  · (1 − U_C)
  eq. 7  FREQ_eff = FREQ · (1 − U_F)
  eq. 8  available capacity = {CPU_eff, FREQ_eff}

The paper leaves U_C and U_F loose. Here both come from per-core busy fractions b_c over a sampling
window: U_C = Σ b_c / CPU (cores' worth of work in use, per core) and U_F = the same mean (the share
of the node's clock cycles already consumed). A first version counted cores busy > 50 % as "in use";
on measured data that flipped CPU_eff between 0 and CPU around half load and erased the difference
between a 1-core and a 2-core node, so the graded share is used. Both lie in [0, 1].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hetsched.core.errors import DataError


@dataclass(frozen=True)
class NodeCapacity:
    """A node's hardware vector and its available capacity under contention (eq. 8)."""

    name: str
    cores: float
    freq_ghz: float
    u_cores: float
    u_freq: float
    # Runnable threads per core, not clipped at 1 (load average or procs_running over the cores):
    # unlike U_C it still grows on a node that is already 100 % busy. None where not measured.
    runq_per_core: float | None = None
    # Share of time some runnable task waited for a CPU (PSI "some", 0-1). None where not measured.
    cpu_pressure: float | None = None

    @property
    def cpu_eff(self) -> float:
        return effective_cores(self.cores, self.u_cores)

    @property
    def freq_eff_ghz(self) -> float:
        return effective_freq(self.freq_ghz, self.u_freq)

    def as_dict(self) -> dict:
        return {**asdict(self), "cpu_eff": self.cpu_eff, "freq_eff_ghz": self.freq_eff_ghz}


def _check_fraction(value: float, what: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise DataError(f"{what} must lie in [0, 1], got {value}")
    return value


def effective_cores(cores: float, u_cores: float) -> float:
    """Eq. 6."""
    return cores * (1.0 - _check_fraction(u_cores, "U_C"))


def effective_freq(freq_ghz: float, u_freq: float) -> float:
    """Eq. 7."""
    return freq_ghz * (1.0 - _check_fraction(u_freq, "U_F"))


def utilisation_fractions(per_core_busy: list[float]) -> tuple[float, float]:
    """(U_C, U_F) from per-core busy fractions in [0, 1] (see the module docstring)."""
    if not per_core_busy:
        raise DataError("no per-core utilisation given")
    busy = [min(max(b, 0.0), 1.0) for b in per_core_busy]
    mean_busy = sum(busy) / len(busy)
    return mean_busy, mean_busy


def local_capacity(
    name: str, cores: list[int] | None = None, window_s: float = 0.3, freq_ghz: float | None = None
) -> NodeCapacity:
    """Samples this machine's utilisation with psutil over ``window_s`` on a subset of cores."""
    import psutil

    per_cpu = psutil.cpu_percent(interval=window_s, percpu=True)
    ids = cores if cores is not None else list(range(len(per_cpu)))
    if freq_ghz is None:
        freq = psutil.cpu_freq()
        freq_ghz = freq.max / 1000 if freq and freq.max else (freq.current / 1000 if freq else 1.0)
    u_c, u_f = utilisation_fractions([per_cpu[i] / 100 for i in ids])
    return NodeCapacity(name, len(ids), float(freq_ghz), u_c, u_f)


def capacity_from_node_exporter(
    name: str, idle_rate_per_cpu: dict[str, float], freq_hz_per_cpu: dict[str, float]
) -> NodeCapacity:
    """Builds eq. 8 from node_exporter data: ``rate(node_cpu_seconds_total{mode="idle"}[w])`` per
    cpu label and ``node_cpu_frequency_max_hertz`` (or scaling frequency) per cpu label."""
    if not idle_rate_per_cpu:
        raise DataError(f"node {name}: no node_cpu_seconds_total idle series")
    busy = [1.0 - rate for rate in idle_rate_per_cpu.values()]
    u_c, u_f = utilisation_fractions(busy)
    freqs = list(freq_hz_per_cpu.values())
    if not freqs:
        raise DataError(f"node {name}: no CPU frequency series")
    return NodeCapacity(name, len(busy), sum(freqs) / len(freqs) / 1e9, u_c, u_f)


def _optional_load(value: object, what: str, high: float) -> float | None:
    """An optional contention number from outside: None, or finite in [0, high]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"bad node-agent payload: {what} is not a number")
    if not 0.0 <= value <= high:  # NaN fails here too
        raise DataError(f"bad node-agent payload: {what} = {value} outside [0, {high}]")
    return float(value)


def capacity_from_agent_json(payload: dict) -> NodeCapacity:
    """Parses the per-node agent's JSON: name, freq_ghz, per_core_busy (fractions) and, when the
    agent could read them, its ``contention`` features (run queue per core, CPU pressure %)."""
    try:
        u_c, u_f = utilisation_fractions([float(b) for b in payload["per_core_busy"]])
        contention = payload.get("contention") or {}
        if not isinstance(contention, dict):
            raise DataError("bad node-agent payload: contention is not an object")
        pressure = _optional_load(contention.get("psi_cpu_some_avg10"), "psi_cpu_some_avg10", 100)
        return NodeCapacity(
            str(payload["name"]),
            len(payload["per_core_busy"]),
            float(payload["freq_ghz"]),
            u_c,
            u_f,
            runq_per_core=_optional_load(contention.get("runq_per_core"), "runq_per_core", 1e6),
            cpu_pressure=None if pressure is None else pressure / 100,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise DataError(f"bad node-agent payload: {error!r}") from error
