"""Live node telemetry for the extender: a node cache keyed by node name, refreshed from Prometheus.

The paper reads each node's utilisation from Prometheus (node_exporter) to form eqs. 6-8. Here a
background thread re-queries Prometheus every ``interval_s`` and swaps in a new snapshot; every
reading remembers when it was taken, and one older than ``ttl_s`` is *stale*: the extender then
scores that node neutrally instead of trusting load it measured minutes ago. The same cache is the
node cache of ``nodeCacheCapable`` mode, where kube-scheduler sends node names only.

Series are matched to Kubernetes nodes by a label that holds the node name (``node`` by default,
as a relabelling ``__meta_kubernetes_node_name → node`` in the scrape config gives); a series
without it falls back to an ``instance → node`` mapping the operator provides. Series matching
neither are skipped and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import repeat
from types import MappingProxyType

import httpx
import numpy as np

from hetsched.core.errors import DataError, HetschedError
from hetsched.core.urls import check_http_url
from hetsched.tail.node_features import NodeCapacity, capacity_from_node_exporter
from hetsched.tail.scoring import DEFAULT_FREQ_GHZ

LOG = logging.getLogger(__name__)
IDLE_QUERY = 'rate(node_cpu_seconds_total{{mode="idle"}}[{window}])'
FREQ_QUERY = "node_cpu_frequency_max_hertz"
# Contention that utilisation cannot show (issue 16; :mod:`hetsched.tail.proc_contention`), each
# optional: node_exporter exports PSI only on kernels that have it.
LOAD1_QUERY = "node_load1"
PROCS_RUNNING_QUERY = "node_procs_running"
PRESSURE_QUERY = "rate(node_pressure_cpu_waiting_seconds_total[{window}])"


@dataclass(frozen=True)
class NodeReading:
    """One node's capacity as last measured, when (``time.monotonic()`` seconds), and its eq. 8
    inputs computed once here rather than on every request."""

    capacity: NodeCapacity
    observed_s: float
    # (cpu_eff, freq_eff_ghz, cores, freq_ghz): eq. 8 now and when idle, in the extender's order.
    columns: tuple[float, float, float, float]

    @classmethod
    def of(cls, capacity: NodeCapacity, observed_s: float) -> NodeReading:
        c = capacity
        return cls(c, observed_s, (c.cpu_eff, c.freq_eff_ghz, c.cores, c.freq_ghz))


@dataclass(frozen=True)
class NodeTable:
    """The node cache as arrays, built once per refresh (off the request path), so a request
    looks its nodes up with one dict probe each and does the rest vectorised.

    ``rows`` maps a node name to its row of ``columns`` (eq. 8 inputs, as
    :attr:`NodeReading.columns`) and ``observed_s``.
    """

    readings: Mapping[str, NodeReading]
    rows: Mapping[str, int]
    columns: np.ndarray
    observed_s: np.ndarray

    @classmethod
    def of(cls, readings: Mapping[str, NodeReading]) -> NodeTable:
        columns = np.array([r.columns for r in readings.values()], dtype=float)
        observed_s = np.array([r.observed_s for r in readings.values()], dtype=float)
        for array in (columns, observed_s):
            array.flags.writeable = False  # shared by concurrent requests
        rows = MappingProxyType({name: i for i, name in enumerate(readings)})
        return cls(readings, rows, columns.reshape(len(readings), 4), observed_s)

    def rows_of(self, names: list[str]) -> np.ndarray:
        """Each name's row, -1 for a node never measured."""
        return np.fromiter(map(self.rows.get, names, repeat(-1)), np.int64, len(names))


EMPTY_TABLE = NodeTable.of({})


@dataclass(frozen=True)
class TelemetryView:
    """A consistent snapshot for one request: the node table, and the time before which its
    readings are stale."""

    table: NodeTable
    stale_before_s: float

    @property
    def readings(self) -> Mapping[str, NodeReading]:
        return self.table.readings

    def lookup(self, name: str) -> tuple[NodeReading | None, bool]:
        """(reading, stale) of node ``name``; (None, False) if it was never measured."""
        reading = self.readings.get(name)
        if reading is None:
            return None, False
        return reading, reading.observed_s < self.stale_before_s

    def fresh_rows(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(row per name, -1 if never measured; whether that row's reading is fresh)."""
        rows = self.table.rows_of(names)
        if not len(self.table.observed_s):
            return rows, np.zeros(len(rows), dtype=bool)
        fresh = self.table.observed_s[rows] >= self.stale_before_s
        return rows, fresh & (rows >= 0)


class NodeTelemetry:
    """Thread-safe node cache: the latest reading per node name, with a staleness TTL."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s <= 0:
            raise HetschedError(f"the telemetry TTL must be positive, got {ttl_s}")
        self.ttl_s = ttl_s
        self.clock = clock
        self._table = EMPTY_TABLE
        self._lock = threading.Lock()
        self.refreshed_s: float | None = None

    def update(self, capacities: Iterable[NodeCapacity]) -> None:
        """Records one refresh: these nodes are measured now; nodes missing from it keep their
        old reading, which ages into staleness."""
        now = self.clock()
        with self._lock:
            merged = dict(self._table.readings)
            merged.update((c.name, NodeReading.of(c, now)) for c in capacities)
            self._table = NodeTable.of(MappingProxyType(merged))
            self.refreshed_s = now

    def view(self) -> TelemetryView:
        """The current snapshot (cheap: the table is swapped whole, never mutated)."""
        return TelemetryView(self._table, self.clock() - self.ttl_s)

    def __len__(self) -> int:
        return len(self._table.readings)


@dataclass(frozen=True)
class PrometheusNodeSource:
    """Where and how to read node_exporter data from Prometheus.

    Args:
        base_url: Prometheus, e.g. ``http://prometheus.monitoring:9090``.
        node_label: The series label holding the Kubernetes node name.
        instance_nodes: ``instance`` label value → node name, for series without ``node_label``.
        window: Rate window of the idle-time counter.
        default_freq_ghz: Clock of nodes that export no ``node_cpu_frequency_max_hertz`` (VMs).
        timeout_s: Per-query HTTP timeout.
    """

    base_url: str
    node_label: str = "node"
    instance_nodes: Mapping[str, str] = field(default_factory=dict)
    window: str = "30s"
    default_freq_ghz: float = DEFAULT_FREQ_GHZ
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        check_http_url(self.base_url, "Prometheus URL")

    def _query(self, client: httpx.Client, expr: str) -> list[dict]:
        try:
            response = client.get(
                f"{self.base_url}/api/v1/query", params={"query": expr}, timeout=self.timeout_s
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise DataError(f"Prometheus at {self.base_url}: {error}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body.get("error") if isinstance(body, dict) else body
            raise DataError(f"Prometheus query {expr!r} failed: {str(said)[:200]}")
        try:
            return list(body["data"]["result"])
        except (KeyError, TypeError):
            raise DataError(f"Prometheus query {expr!r}: no data.result in the answer") from None

    def _node_of(self, metric: Mapping[str, str]) -> str | None:
        node = metric.get(self.node_label)
        return node if node is not None else self.instance_nodes.get(metric.get("instance", ""))

    def _per_node_cpu(self, series: list[dict]) -> tuple[dict[str, dict[str, float]], int]:
        """{node: {cpu: value}} of a per-cpu query, and how many series named no node."""
        out: dict[str, dict[str, float]] = {}
        skipped = 0
        for item in series:
            try:
                metric, value = item["metric"], float(item["value"][1])
                node, cpu = self._node_of(metric), str(metric["cpu"])
            except (KeyError, TypeError, ValueError, IndexError):
                skipped += 1
                continue
            if node is None:
                skipped += 1
                continue
            out.setdefault(node, {})[cpu] = value
        return out, skipped

    def _per_node(self, client: httpx.Client, expr: str) -> dict[str, float]:
        """{node: value} of an optional per-node query; empty if it fails or a value is not a
        finite non-negative number (that node's feature is then absent, not an error)."""
        try:
            series = self._query(client, expr)
        except DataError as error:
            LOG.info("optional node query %r failed: %s", expr, error)
            return {}
        out: dict[str, float] = {}
        for item in series:
            try:
                node, value = self._node_of(item["metric"]), float(item["value"][1])
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                continue
            if node is not None and 0.0 <= value < float("inf"):
                out[node] = value
        return out

    @staticmethod
    def contention(capacity: NodeCapacity, load: dict[str, dict[str, float]]) -> NodeCapacity:
        """``capacity`` with its run queue per core (node_load1, else node_procs_running, over
        the cores) and CPU pressure (the PSI waiting-seconds rate) where Prometheus has them."""
        name = capacity.name
        runq = load["load1"].get(name, load["procs"].get(name))
        pressure = load["pressure"].get(name)
        return replace(
            capacity,
            runq_per_core=None if runq is None else runq / capacity.cores,
            cpu_pressure=None if pressure is None else min(pressure, 1.0),
        )

    def fetch(self, client: httpx.Client) -> tuple[list[NodeCapacity], int]:
        """Eq. 8 for every node Prometheus knows, with the contention features it has, and the
        number of series skipped."""
        idle, skipped_idle = self._per_node_cpu(
            self._query(client, IDLE_QUERY.format(window=self.window))
        )
        freq, skipped_freq = self._per_node_cpu(self._query(client, FREQ_QUERY))
        default = {"default": self.default_freq_ghz * 1e9}
        load = {
            "load1": self._per_node(client, LOAD1_QUERY),
            "procs": self._per_node(client, PROCS_RUNNING_QUERY),
            "pressure": self._per_node(client, PRESSURE_QUERY.format(window=self.window)),
        }
        capacities = [
            self.contention(
                capacity_from_node_exporter(node, idle[node], freq.get(node) or default),
                load,
            )
            for node in sorted(idle)
        ]
        return capacities, skipped_idle + skipped_freq


class TelemetryRefresher:
    """Refreshes a :class:`NodeTelemetry` from a source every ``interval_s`` on a daemon thread.

    A failed refresh is logged and counted (``on_failure``); the old readings stay and age into
    staleness, so a Prometheus outage degrades the extender to neutral scores, never to errors.
    """

    def __init__(
        self,
        source: PrometheusNodeSource,
        telemetry: NodeTelemetry,
        interval_s: float,
        on_failure: Callable[[Exception], None] = lambda error: None,
        on_skipped: Callable[[int], None] = lambda count: None,
    ) -> None:
        if interval_s <= 0:
            raise HetschedError(f"the refresh interval must be positive, got {interval_s}")
        self.source, self.telemetry, self.interval_s = source, telemetry, interval_s
        self.on_failure, self.on_skipped = on_failure, on_skipped
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client = httpx.Client()

    def refresh_once(self) -> bool:
        """One refresh; True if it succeeded."""
        try:
            capacities, skipped = self.source.fetch(self._client)
        except (DataError, HetschedError) as error:
            LOG.warning("node telemetry refresh failed: %s", error)
            self.on_failure(error)
            return False
        self.telemetry.update(capacities)
        self.on_skipped(skipped)
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_once()
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        """Refreshes now and then every ``interval_s`` until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="node-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._client.close()


def parse_instance_nodes(pairs: Iterable[str]) -> dict[str, str]:
    """``["10.0.0.5:9100=node-a", ...]`` → {instance: node}; a malformed pair is an error."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        instance, sep, node = pair.rpartition("=")
        if not sep or not instance or not node:
            raise HetschedError(f"bad instance mapping {pair!r}: use INSTANCE=NODE")
        mapping[instance] = node
    return mapping
