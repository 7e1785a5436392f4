"""Prometheus exposition of the harness's measured latencies and the features beside them.

``hetsched tail measure --prometheus-port`` serves them, so ``hetsched tail dataset --prometheus``
can rebuild the training rows from ``histogram_quantile(0.9, ...)`` as the paper does.
"""

from __future__ import annotations

# Histogram buckets (s) reaching far above the worst tail, so histogram_quantile stays bounded.
LATENCY_BUCKETS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.75,
    1.0,
    1.5,
    2.5,
    5.0,
    10.0,
    30.0,
)


class LatencyExporter:
    """Prometheus exposition of measured latencies (histogram) and the features beside them."""

    def __init__(self, port: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server

        self.registry = CollectorRegistry()
        labels = ["model", "node"]
        self.latency = Histogram(
            "hetsched_inference_latency_seconds",
            "Single-stream query latency",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.gauges = {
            key: Gauge(f"hetsched_{key}", f"Feature {key}", labels, registry=self.registry)
            for key in ("size_mb", "flops", "cpu_eff", "freq_eff_ghz")
        }
        self.server, self.thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)

    def record(self, row: dict) -> None:
        labels = {"model": row["model"], "node": row["node"]}
        for key, gauge in self.gauges.items():
            gauge.labels(**labels).set(row[key])
        for latency in row["latencies_s"]:
            self.latency.labels(**labels).observe(latency)

    def close(self) -> None:
        self.server.shutdown()
