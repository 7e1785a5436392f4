"""The Prometheus path end to end: harness histograms scraped by a real Prometheus 2.x, then the
dataset builder's query_range + histogram_quantile (integration; skips without the binary)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time

import httpx
import numpy as np
import pytest

from hetsched.tail.dataset import from_prometheus
from hetsched.tail.latency_exporter import LatencyExporter

pytestmark = [pytest.mark.integration, pytest.mark.needs_prometheus]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed (Debian package: prometheus)")
    exporter_port, prom_port = _free_port(), _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n  - job_name: hetsched\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
    )
    exporter = LatencyExporter(exporter_port)
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{prom_port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, exporter
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        exporter.close()


def test_dataset_from_real_prometheus(prometheus):
    url, exporter = prometheus
    rng = np.random.default_rng(0)
    stop = threading.Event()

    def observe() -> None:  # keep the counters moving so rate() is defined
        while not stop.is_set():
            latencies = list(rng.uniform(0.010, 0.030, 50))
            exporter.record(
                {
                    "model": "cnn-s",
                    "node": "core0",
                    "size_mb": 0.09,
                    "flops": 2.2e7,
                    "cpu_eff": 1.0,
                    "freq_eff_ghz": 2.3,
                    "latencies_s": latencies,
                }
            )
            time.sleep(0.1)

    thread = threading.Thread(target=observe)
    start = time.time()
    thread.start()
    try:
        rows: list[dict] = []
        for _ in range(40):
            time.sleep(0.5)
            rows = from_prometheus(url, start, time.time(), step_s=1.0, window="5s")
            if len(rows) >= 2:
                break
    finally:
        stop.set()
        thread.join()
    assert len(rows) >= 2
    row = rows[-1]
    assert (row["model"], row["node"], row["flops"], row["cpu_eff"]) == (
        "cnn-s",
        "core0",
        2.2e7,
        1.0,
    )
    # uniform(10, 30) ms: true P90 is 28 ms; buckets 20/35 ms bound the interpolated quantile
    assert 0.020 <= row["p90_s"] <= 0.035
    timestamps = [r["timestamp_s"] for r in rows]
    assert timestamps == sorted(timestamps)
