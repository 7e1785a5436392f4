"""Tiny-budget end-to-end runs of every `hetsched tail` command."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.tail.dataset import load_csv
from hetsched.tail.fake_apiserver import FakeApiServer
from hetsched.tail.validation import BASELINE, cross_validate

from .conftest import write_rows_csv
from .kube_fixtures import make_node, make_pod, write_kubeconfig

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(typer_app, ["tail", *args])
    return result


@pytest.mark.parametrize(
    "command",
    [
        "flops",
        "catalog",
        "measure",
        "dataset",
        "train",
        "retrain",
        "extender",
        "schedule",
        "benchmark",
    ],
)
def test_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0 and "Usage" in result.output


def test_flops_and_bad_model():
    result = invoke("flops", "cnn-s")
    assert result.exit_code == 0 and "cnn-s" in result.output
    bad = invoke("flops", "nosuchnet")
    assert bad.exit_code != 0 and "neither a zoo name" in str(bad.exception)
    url = invoke("flops", "http://127.0.0.1:9/m.onnx")  # a URL is a (missing) local path at most
    assert url.exit_code != 0 and "no such ONNX file" in str(url.exception)


def test_catalog_writes_a_loadable_catalogue(tmp_path):
    from hetsched.tail.catalog import load_catalog

    out = tmp_path / "catalog.json"
    result = invoke("catalog", "cnn-s", "cnn-m", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert load_catalog(out).model_keys() == ["cnn-m", "cnn-s"]


def test_measure_dataset_train_retrain_benchmark(tmp_path, rows):
    measured = tmp_path / "m.csv"
    result = invoke(
        "measure", "--models", "cnn-s:8", "--nodes", "0", "--duties", "0", "--out", str(measured)
    )
    assert result.exit_code == 0, result.output
    (point,) = load_csv(measured)
    assert point["model"] == "cnn-s" and point["queries"] == "8" and point["torch_threads"] == "1"
    assert float(point["contention_achieved"]) == 0.0 and 0.0 <= float(point["u_cores"]) <= 1.0
    assert float(point["load1"]) >= 0.0 and float(point["run_s"]) > 0.0
    assert 0.0 < float(point["pod_cpu_share"]) <= 1.0 + 1e-6

    synthetic = tmp_path / "s.csv"
    # Measurement cells (threads, duty bucket) so that `train` can report the repeat spread.
    cells = [{**r, "torch_threads": 1, "contention_duty": round(r["u_freq"] * 2) / 2} for r in rows]
    write_rows_csv(cells, synthetic)
    dataset = tmp_path / "d.csv"
    assert (
        invoke(
            "dataset", "--csv", str(synthetic), "--out", str(dataset), "--smooth-window", "3"
        ).exit_code
        == 0
    )
    repo = tmp_path / "models"
    result = invoke("train", "--data", str(dataset), "--repo", str(repo), "--splits", "2")
    assert result.exit_code == 0, result.output
    assert "random_forest" in result.output and (repo / "v0001" / "meta.json").is_file()
    over = json.loads((repo / "v0001" / "report.json").read_text())["over_splits"]
    assert {r["regressor"] for r in over} == {"random_forest", "xgboost", "mlp", "gaussian_process"}
    assert all(r["splits"] == 2 for r in over)
    assert all(r["rmsle_min"] <= r["rmsle_mean"] <= r["rmsle_max"] for r in over)
    assert "repeat spread: RMSLE floor" in result.output  # the cell columns survived `dataset`
    # Harness rows name their cells, so the regressor is the one best on cells it never saw.
    report = json.loads((repo / "v0001" / "report.json").read_text())
    by_cell = cross_validate(load_csv(dataset), "cell", 5, seed=0)
    best = min((r for r in by_cell if r["regressor"] != BASELINE), key=lambda r: r["rmsle_mean"])
    assert report["chosen_by"] == "leave-cell-out" and report["best"] == best["regressor"]
    assert f"best {best['regressor']} (by leave-cell-out)" in " ".join(result.output.split())
    assert "trained on nodes with CPU_eff" in " ".join(result.output.split())
    node_range = json.loads((repo / "v0001" / "report.json").read_text())["node_range"]
    assert set(node_range) == {"cpu_eff", "freq_eff_ghz"}
    result = invoke("retrain", "--repo", str(repo), "--data", str(synthetic))
    assert (
        result.exit_code == 0
        and "v0001" in result.output
        and (repo / "latest").read_text() == "v0002"
    )

    out = tmp_path / "bench"
    result = invoke(
        "benchmark",
        "--measured",
        str(synthetic),
        "--runs",
        "2",
        "--seed",
        "7",
        "--queries",
        "32",
        "--regressor",
        "gaussian_process",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "benchmark.json").read_text())
    assert report["queries"] == 32 and report["regressor"] == "gaussian_process"
    assert (out / "avg_np90.png").is_file()


def test_extender_config_and_schedule(repo_dir):
    result = invoke("extender", "--print-config", "--port", "9999")
    assert 'urlPrefix: "http://127.0.0.1:9999"' in result.output
    assert "ignorable: true" in result.output and "nodeCacheCapable: false" in result.output


def test_schedule_binds_through_a_kubeconfig(repo_dir, tmp_path):
    nodes = [make_node("tiny", cpu="2", cordoned=True), make_node("big", cpu="16")]
    api = FakeApiServer(nodes, [make_pod("p", cpu="4"), make_pod("huge", cpu="64")])
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "unused-token")
    try:
        args = ["--kubeconfig", str(kubeconfig), "--repo", str(repo_dir), "--rounds", "1"]
        result = invoke("schedule", *args)
        assert result.exit_code == 0, result.output
        assert "Scheduled default/p → big" in result.output
        assert "FailedScheduling default/huge: 0/2 nodes are available" in result.output
        assert "1 pods bound, 1 scheduling failures" in result.output
        assert [b["target"]["name"] for b in api.bindings] == ["big"]
        missing = invoke("schedule", "--kubeconfig", str(tmp_path / "none"), *args[2:])
        assert missing.exit_code != 0 and "not found" in str(missing.exception)
    finally:
        api.close()


def test_extender_serves_for_a_duration(repo_dir, tmp_path):
    done = threading.Event()
    outputs: list[str] = []
    token = tmp_path / "token"
    token.write_text("s3cret\n")

    def run() -> None:
        args = ["--repo", str(repo_dir), "--port", "0", "--duration-s", "0.2"]
        result = invoke("extender", *args, "--host", "0.0.0.0", "--token-file", str(token))
        outputs.append(result.output)
        outputs.append(invoke("extender", *args, "--host", "0.0.0.0").output)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert done.is_set()
    assert "extender on http://" in outputs[0] and "warning" not in outputs[0]
    assert "without a bearer token" in outputs[1]


def test_extender_refuses_bad_options(repo_dir, tmp_path):
    missing = invoke("extender", "--repo", str(repo_dir), "--token-file", str(tmp_path / "no"))
    assert missing.exit_code != 0 and "not found" in str(missing.exception)
    half_tls = invoke("extender", "--repo", str(repo_dir), "--tls-cert", str(tmp_path / "c"))
    assert half_tls.exit_code != 0 and "certificate and a key" in str(half_tls.exception)
    bad_map = ["--node-prometheus", "http://127.0.0.1:9", "--instance-node", "no-equals"]
    mapping = invoke("extender", "--repo", str(repo_dir), "--port", "0", *bad_map)
    assert mapping.exit_code != 0 and "INSTANCE=NODE" in str(mapping.exception)


def test_dataset_needs_one_source(tmp_path):
    result = invoke("dataset", "--out", str(tmp_path / "x.csv"))
    assert result.exit_code != 0 and "exactly one" in str(result.exception)


def test_train_on_too_few_rows_stops_before_any_fitting(tmp_path):
    rows = load_csv(Path(__file__).parents[2] / "src/hetsched/tail/data/measured-2core-dense.csv")
    few = tmp_path / "few.csv"
    write_rows_csv(rows[:3], few)
    result = invoke("train", "--data", str(few), "--repo", str(tmp_path / "m"))
    assert result.exit_code != 0
    assert "need at least 8 rows to train and test, got 3" in str(result.exception)
    assert "Leave-cell-out" not in result.output  # no cross-validation ran first
