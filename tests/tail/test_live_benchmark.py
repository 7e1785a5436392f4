"""`hetsched tail benchmark --live`: real pods on this machine's cores, the shared placement code
path, and the flags' errors."""

from __future__ import annotations

import json
import os

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import DataError
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.harness import EmulatedNode
from hetsched.tail.live_nodes import (
    LIVE_POD_THREADS,
    LIVE_SCALE,
    MEMORY_PER_CORE,
    live_requests,
    resolve_nodes,
    table_i_nodes,
)
from hetsched.tail.live_pods import loop_queries
from hetsched.tail.placement import SCORERS, place
from hetsched.tail.sim_cluster import POD_REQUESTS, TABLE_I, simulated_observer

runner = CliRunner()


class FlopsOverCapacity:
    """Hand-made predictor of both eq. 8 inputs: GFLOPs / CPU_eff, slower as FREQ_eff drops."""

    def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
        return np.array(
            [
                r["flops"]
                / 1e9
                / max(r["cpu_eff"], 0.5)
                * (2.3 / max(r["freq_eff_ghz"], 0.3)) ** 0.5
                for r in rows
            ]
        )


# Node indices of 10 pods per scorer, recorded with place() before it took the nodes and an
# observer as arguments: default, p90, p90-node (avg_np90), p90-node (sum), by (seed, background).
PLACEMENTS_BEFORE_REFACTOR = {
    (0, False): "2312303212 3231230123 3231023123 3213023123",
    (0, True): "2312303212 3131230123 3132013002 3132013002",
    (1, False): "3213022311 3231230123 3231023123 3231023123",
    (1, True): "3213022311 3131230310 3132013001 3132013002",
    (2, False): "3212021331 3231230123 3213230123 3213203123",
    (2, True): "3212021331 3131230300 3132013003 3123013002",
    (3, False): "3212321302 3231230123 3213230213 3213203123",
    (3, True): "3212321302 3131230233 3132013002 3123013002",
}


def test_simulated_placements_are_those_before_the_refactor():
    features = {
        m: ModelFeatures("m", int(f), 1.0, int(f), 0, 0, 0)
        for m, f in (("retinanet", 30e9), ("resnet50", 8e9))
    }
    runs = [
        ("default", "avg_np90"),
        ("p90", "avg_np90"),
        ("p90-node", "avg_np90"),
        ("p90-node", "sum"),
    ]
    for (seed, loaded), recorded in PLACEMENTS_BEFORE_REFACTOR.items():
        pods = [str(m) for m in np.random.default_rng(seed).choice(list(POD_REQUESTS), size=10)]
        observe = simulated_observer((0.5, 0.1, 0.7, 0.3) if loaded else (0.0,) * 4)
        got = []
        for scorer, objective in runs:
            rng = np.random.default_rng(seed + 1)
            placement = place(
                pods,
                features,
                scorer,
                FlopsOverCapacity(),
                rng,
                TABLE_I,
                observe,
                POD_REQUESTS,
                objective,
            )
            got.append("".join(map(str, placement)))
        assert " ".join(got) == recorded


def test_default_nodes_are_table_i_over_four_and_need_ten_cores():
    nodes = table_i_nodes()
    assert [n.node.cores for n in nodes] == [(0,), (1, 2), (3, 4, 5), (6, 7, 8, 9)]
    for live, sim in zip(nodes, TABLE_I, strict=True):
        assert live.allocatable.cores * LIVE_SCALE == sim.cores and live.name == sim.name
        assert live.memory_bytes == sim.memory_bytes // LIVE_SCALE
    assert LIVE_POD_THREADS == 1
    assert resolve_nodes(None, set(range(16))) == nodes
    with pytest.raises(DataError, match=r"--live-nodes.*needs 10 cores, this machine has 2"):
        resolve_nodes(None, {0, 1})


def test_core_set_nodes_get_table_i_memory_per_core_and_scaled_requests():
    (node,) = resolve_nodes([EmulatedNode("cores0-1", (0, 1), 2.3)], {0, 1})
    assert node.memory_bytes == round(2 * MEMORY_PER_CORE)
    requests = live_requests(["retinanet", "resnet50", "cnn-s"])
    assert requests["retinanet"] == (2.0 / LIVE_SCALE, POD_REQUESTS["retinanet"][1] / LIVE_SCALE)
    assert requests["cnn-s"] == requests["resnet50"] == (0.25, POD_REQUESTS["resnet50"][1] / 4)


def test_a_loading_run_lasts_about_half_a_second():
    assert loop_queries([0.001] * 4) == 500
    assert loop_queries([2.0, 2.0]) == 1  # at least one query


def _spawned_children() -> set[int]:
    """Worker processes (multiprocessing spawn) that this test process has running."""
    children = psutil.Process().children(recursive=True)
    return {p.pid for p in children if "spawn_main" in " ".join(p.cmdline())}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs cores 0 and 1")
def test_live_run_places_measures_and_stops_every_pod(tmp_path, repo_dir):
    before = _spawned_children()
    out = tmp_path / "live"
    args = ["--live", "--repo", str(repo_dir), "--live-nodes", "0;1", "--live-models", "cnn-s"]
    args += [
        "--pods",
        "3",
        "--queries",
        "16",
        "--runs",
        "1",
        "--seed",
        "0",
        "--slo-ms",
        "50",
        "--out",
        str(out),
    ]
    result = runner.invoke(typer_app, ["tail", "benchmark", *args])
    assert result.exit_code == 0, result.output
    assert "AVG_NP90" in result.output and (out / "avg_np90.png").is_file()
    report = json.loads((out / "benchmark.json").read_text())
    assert report["nodes"] == ["cores0", "cores1"] and report["model_version"] == "v0001"
    (seed,) = report["seeds"]
    assert seed["pods"] == ["cnn-s"] * 3
    cpu, memory = report["requests"]["cnn-s"]
    for scorer in SCORERS:
        run = seed[scorer]
        assert len(run["placement"]) == 3 and all(p > 0 for p in run["pod_p90_s"])
        for node in report["live_nodes"]:  # NodeResourcesFit held on every node
            pods_on = run["placement"].count(node["name"])
            assert pods_on * cpu <= len(node["cores"]) and pods_on * memory <= node["memory_bytes"]
        assert set(run["avg_np90_s"]) == set(run["placement"])  # eq. 16 for occupied nodes only
        assert all(c > 0 for c in run["pod_cpu_cores"]) and len(run["load_avg"]) == 3
        assert 0.0 <= run["slo_violation_rate"] <= 1.0
        observed = run["observed_at_placement"]
        assert len(observed) == (0 if scorer == "default" else 3)  # default never observes
        for caps in observed:
            assert [c["name"] for c in caps] == report["nodes"]
            assert all(0.0 <= c["u_cores"] <= 1.0 and c["cores"] == 1 for c in caps)
    assert set(report["summary"]) == set(SCORERS)
    assert _spawned_children() <= before  # every pod's process is gone


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--live-nodes", "0"], "--repo"),
        (["--repo", "{empty}", "--live-nodes", "0"], "--repo"),
        (
            ["--repo", "{repo}", "--live-nodes", "0", "--live-models", "cnn-s,nosuchnet"],
            "--live-models",
        ),
        (["--repo", "{repo}", "--live-nodes", "0;0"], "--live-nodes"),
        (["--repo", "{repo}", "--live-nodes", "0;4096"], "--live-nodes"),
        (["--repo", "{repo}", "--live-nodes", "0;x"], "--live-nodes"),
        (
            ["--repo", "{repo}", "--live-nodes", "0", "--live-models", "cnn-s", "--pods", "5"],
            "--live-nodes",
        ),
        (["--repo", "{repo}", "--live-nodes", "0", "--background", "0,0.5"], "--background"),
        (["--repo", "{repo}", "--live-nodes", "0", "--objective", "max"], "--objective"),
    ],
)
def test_bad_live_input_is_rejected_naming_the_flag(tmp_path, repo_dir, args, flag):
    (tmp_path / "empty").mkdir()
    filled = [a.format(empty=tmp_path / "empty", repo=repo_dir) for a in args]
    result = runner.invoke(typer_app, ["tail", "benchmark", "--live", *filled])
    assert result.exit_code != 0 and flag in str(result.exception), result.output
