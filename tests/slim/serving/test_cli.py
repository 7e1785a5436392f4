"""`hetsched slim serve` + `hetsched slim loadgen` end to end, on a tiny budget."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import ConfigError
from hetsched.slim.routers.ppo import StateEncoder, new_policy, save_router
from hetsched.slim.serving.loadgen import wait_ready

runner = CliRunner()
TOKEN = "cli-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ppo_checkpoint(tmp_path: Path) -> Path:
    """A PPO router for two servers (untrained: what matters here is that serving loads it)."""
    encoder = StateEncoder(2, (0.25, 0.5, 0.75, 1.0), (1, 4, 8, 16))
    path = tmp_path / "ppo-2servers.pt"
    save_router(path, new_policy(encoder), encoder, (64, 64))
    return path


def test_serve_then_loadgen_reports_throughput_latency_and_energy(
    tmp_path: Path, digits_checkpoint: Path, ppo_checkpoint: Path
):
    port = free_port()
    config = tmp_path / "cluster.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "checkpoint": str(digits_checkpoint),
                "servers": [{"name": "cpu0"}, {"name": "cpu1"}],
                "executor": {"max_batch": 8},
            }
        )
    )
    command = [sys.executable, "-c", "from hetsched.cli import app; app()", "slim", "serve"]
    args = ["--config", str(config), "--port", str(port), "--token", TOKEN, "--num-cpus", "2"]
    env = os.environ | {"RAY_AUTH_MODE": "disabled"}
    process = subprocess.Popen(
        [*command, *args, "--router", str(ppo_checkpoint)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, is_alive=lambda: process.poll() is None)
        report_path = tmp_path / "report.json"
        result = runner.invoke(
            typer_app,
            ["slim", "loadgen", "--url", url, "--rate", "20", "--pattern", "bursty",
             "--duration-s", "2", "--data", "digits:8", "--token", TOKEN,
             "--out", str(report_path)],
            catch_exceptions=False,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "latency p50 / p90 / p99" in result.output and "energy per image" in result.output
        report = json.loads(report_path.read_text())
        assert report["requests_ok"] == report["requests_sent"] > 10, report
        assert report["errors"] == {}
        assert report["throughput_images_per_s"] > 0
        assert report["latency_s"]["p50"] <= report["latency_s"]["p99"]
        assert "admitted, 200 or 504" in result.output  # no 504 here: the 200s alone
        assert report["admitted_latency_s"] == report["latency_s"]
        assert report["energy_j_per_image"] > 0 and report["energy_source"] == "power-model"
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert f"serving {digits_checkpoint}" in output
    assert f"servers up: cpu0 (cpu), cpu1 (cpu); router {ppo_checkpoint}" in output


def test_loadgen_needs_exactly_one_of_rate_and_concurrency():
    result = runner.invoke(
        typer_app, ["slim", "loadgen", "--url", "http://127.0.0.1:9", "--duration-s", "1"]
    )
    assert "exactly one of --rate" in str(result.exception)


def test_a_server_that_cannot_start_is_one_line_without_a_traceback(tmp_path: Path):
    not_a_checkpoint = tmp_path / "model.pt"
    not_a_checkpoint.write_text("not a checkpoint")
    config = tmp_path / "cluster.yaml"
    config.write_text(f"checkpoint: {not_a_checkpoint}\npool: local\nservers: [{{name: a}}]\n")
    command = [sys.executable, "-c", "from hetsched.cli import app; app()", "slim", "serve"]
    result = subprocess.run(
        [*command, "--config", str(config), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "not a readable checkpoint" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def test_serve_names_a_bad_config_field(tmp_path: Path):
    config = tmp_path / "cluster.yaml"
    config.write_text("checkpoint: x.pt\nservers: [{name: a}, {name: a}]\n")
    result = runner.invoke(typer_app, ["slim", "serve", "--config", str(config)])
    assert "servers" in str(result.exception) and "unique" in str(result.exception)


@pytest.mark.parametrize("nice", [-1, 20])
def test_serve_refuses_a_niceness_that_would_raise_priority_or_is_out_of_range(tmp_path, nice):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"checkpoint: x.pt\nservers: [{{name: a, nice: {nice}}}]\n")
    result = runner.invoke(typer_app, ["slim", "serve", "--config", str(config)])
    assert "servers.0.nice" in str(result.exception)


@pytest.mark.parametrize("field", ["onednn_cache_capacity", "torch_lru_cache_capacity"])
@pytest.mark.parametrize("capacity", ["-1", "2.5", "lots", "true", "'5'", "1000001"])
def test_serve_refuses_a_bad_convolution_cache_capacity(tmp_path, field, capacity):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"checkpoint: x.pt\nservers: [{{name: a, {field}: {capacity}}}]\n")
    result = runner.invoke(typer_app, ["slim", "serve", "--config", str(config)])
    assert f"servers.0.{field}" in str(result.exception)


@pytest.mark.parametrize("threads", ["0", "-1", "1.5", "true", "'2'", "257"])
def test_serve_refuses_bad_torch_threads(tmp_path, threads):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"checkpoint: x.pt\nservers: [{{name: a, torch_threads: {threads}}}]\n")
    result = runner.invoke(typer_app, ["slim", "serve", "--config", str(config)])
    assert "servers.0.torch_threads" in str(result.exception)


def test_serve_refuses_a_network_address_without_a_token(tmp_path: Path):
    config = tmp_path / "cluster.yaml"
    config.write_text("checkpoint: x.pt\n")
    result = runner.invoke(
        typer_app, ["slim", "serve", "--config", str(config), "--host", "0.0.0.0"]
    )
    assert "no --token" in str(result.exception) and "--insecure" in str(result.exception)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://127.0.0.1", "http://", "127.0.0.1:8000"]
)
def test_the_readiness_probe_opens_only_http_urls(url):
    with pytest.raises(ConfigError, match="not an http"):
        wait_ready(url, timeout_s=0.1)
