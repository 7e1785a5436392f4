"""SLO metrics of one run, measured on a steady-state window (issue 19, "measure properly").

* **Window**: the images arriving after the warm-up (the scenario's ``warmup_fraction`` of the
  arrival span) up to the last arrival. Latency (mean, p50, p99), accuracy and SLO attainment are
  taken over these images; an image that never finished (dropped or rejected) counts as a miss.
* **SLO attainment**: the share of window images finished by their deadline. **Goodput**: those
  images per second of window.
* **Energy per image**: every server's energy counter (the simulated device's exact integral of
  its power model, busy and idle alike, so a batch shared by several images is paid once and
  spread over them) read at the window's start and end, divided by the images completed in the
  window. It does not depend on latency, unlike the paper's per-image P̄ · L.
* **Stability**: a policy whose queues grow without bound has no mean latency to quote, only a
  figure that grows with the run length. The number of images in the system is averaged over the
  first and the last quarter of the window; when it grew by more than 5 % of the window's
  arrivals, the run is ``unstable`` and its tables say so instead of a mean. (Quarters at both
  ends, so that a diurnal window of whole periods compares like with like: a stable policy's
  backlog is as small after the peak as before it.)
* **Widths**: the shares of segments the router asked for at each width beside the shares that
  ran (FINDFREEBESTFIT may run a request on a wider free instance).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hetsched.slim.cluster.slim_cluster import SlimCluster

STABILITY_SAMPLES = 256
"""Points at which the number of images in the system is read over the window."""
STABILITY_SLACK_SHARE = 0.05
"""Growth of the mean backlog, as a share of the window's arrivals, that is still stable."""


@dataclass(frozen=True)
class WindowMetrics:
    """The SLO metrics of one run (one policy, one scenario, one seed)."""

    images: int
    """Images that arrived in the window."""
    window_s: float
    accuracy_pct: float
    slo_attainment: float
    """Share of window images finished by their deadline, in [0, 1]."""
    goodput_per_s: float
    """Window images finished by their deadline, per second of window."""
    latency_mean_s: float
    latency_p50_s: float
    latency_p99_s: float
    energy_per_image_j: float
    energy_source: str
    """Where the energy figures come from (``model`` in simulation)."""
    backlog_growth: float
    """Mean images in the system in the window's last quarter minus its first quarter."""
    unstable: bool
    requested_widths: dict[str, float]
    """Share of segment requests the router asked for at each width."""
    executed_widths: dict[str, float]
    """Share of segments that ran at each width."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


class EnergyProbe:
    """Reads every server's energy counter at the window's start and end (two clock events).

    Args:
        cluster: A cluster whose servers report energy (greedy executors).
        start_s: Window start on the cluster clock.
        end_s: Window end.
    """

    def __init__(self, cluster: SlimCluster, start_s: float, end_s: float) -> None:
        self._servers = cluster.servers
        self.readings: list[list[float]] = []
        self.source = "none"
        now_s = cluster.clock.now_s()
        for at_s in (start_s, end_s):
            cluster.clock.schedule(max(at_s, now_s), self._read)

    def _read(self) -> None:
        readings = [server.energy() for server in self._servers]
        self.readings.append([joules for joules, _ in readings])
        self.source = ",".join(sorted({source for _, source in readings})) or "none"

    @property
    def window_energy_j(self) -> float:
        """Joules all servers used between the two readings (NaN before both were taken)."""
        if len(self.readings) < 2:
            return math.nan
        return float(sum(self.readings[1]) - sum(self.readings[0]))


def width_shares(counts: dict[float, int]) -> dict[str, float]:
    """Counts per width as shares, keyed by the width's text (JSON keys)."""
    total = sum(counts.values())
    return {
        f"{width:g}": (count / total if total else 0.0) for width, count in sorted(counts.items())
    }


def window_metrics(
    cluster: SlimCluster, probe: EnergyProbe, start_s: float, end_s: float
) -> WindowMetrics:
    """The metrics of a finished run on the window [start_s, end_s] (see the module docstring)."""
    arrivals = np.asarray(cluster.arrival_times_s, dtype=float)
    in_window = (arrivals >= start_s) & (arrivals <= end_s)
    window_images = int(in_window.sum())
    done = [image for image in cluster.completed if start_s <= image.arrival_s <= end_s]
    latencies = np.asarray([image.latency_s for image in done], dtype=float)
    met = sum(image.met_slo for image in done)
    window_s = max(end_s - start_s, 1e-12)
    finished = np.sort(np.asarray([image.finished_s for image in cluster.completed], dtype=float))
    completed_in_window = int(np.sum((finished >= start_s) & (finished <= end_s)))
    growth = _backlog_growth(arrivals, finished, start_s, end_s)
    executed: dict[float, int] = dict.fromkeys(cluster.requested_widths, 0)
    for image in cluster.completed:
        for width in image.widths:
            executed[width] = executed.get(width, 0) + 1
    nan = math.nan
    return WindowMetrics(
        images=window_images,
        window_s=window_s,
        accuracy_pct=100.0 * float(np.mean([i.correct for i in done])) if done else nan,
        slo_attainment=met / window_images if window_images else nan,
        goodput_per_s=met / window_s,
        latency_mean_s=float(latencies.mean()) if done else nan,
        latency_p50_s=float(np.percentile(latencies, 50)) if done else nan,
        latency_p99_s=float(np.percentile(latencies, 99)) if done else nan,
        energy_per_image_j=(
            probe.window_energy_j / completed_in_window if completed_in_window else nan
        ),
        energy_source=probe.source,
        backlog_growth=growth,
        unstable=growth > STABILITY_SLACK_SHARE * window_images,
        requested_widths=width_shares(cluster.requested_widths),
        executed_widths=width_shares(executed),
    )


def _backlog_growth(
    arrivals_s: np.ndarray, finished_s: np.ndarray, start_s: float, end_s: float
) -> float:
    """Mean images in the system over the window's last quarter minus over its first quarter."""
    times = np.linspace(start_s, end_s, STABILITY_SAMPLES)
    in_system = np.searchsorted(arrivals_s, times, side="right") - np.searchsorted(
        finished_s, times, side="right"
    )
    quarter = STABILITY_SAMPLES // 4
    return float(in_system[-quarter:].mean() - in_system[:quarter].mean())
