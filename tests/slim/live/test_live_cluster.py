"""The Slim cluster on the live backend: real images through all four segments on CPU servers."""

import json
import threading
import time

import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import ConfigError, DataError
from hetsched.core.realtime import RealTimeLoop
from hetsched.slim.live.cluster import LiveSetup, choose_devices
from hetsched.slim.model.checkpoint import save_checkpoint
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster

DATA = "digits:8"
runner = CliRunner()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A SlimResNet with seeded random weights for 8x8 digits: the mechanism, not the accuracy,
    is under test, and no training keeps the module fast."""
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("live-cluster") / "checkpoint.pt"
    save_checkpoint(path, SlimResNet(num_classes=10), epoch=0, config={"data": DATA})
    return path


def test_step_waits_for_an_expected_hand_off_and_ends_when_nothing_is_left():
    loop = RealTimeLoop()
    ran = []
    loop.schedule_in(0.02, lambda: ran.append("timer"))
    done = loop.expect(lambda value: ran.append(value))

    def worker():
        time.sleep(0.05)
        loop.call_soon_threadsafe(lambda: done("hand-off"))

    threading.Thread(target=worker).start()
    assert loop.step() and ran == ["timer"]
    assert loop.step() and ran == ["timer", "hand-off"]  # the heap was empty: step waited
    assert loop.now_s() >= 0.05
    assert not loop.step()


@pytest.fixture
def cpu_only(monkeypatch):
    """These tests check the CPU defaults, also on a machine with a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_default_devices_share_the_gpus_round_robin_else_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert choose_devices(3, None)[0] == ("cuda:0", "cuda:1", "cuda:0")
    assert choose_devices(2, ["cpu", "cuda:0"])[0] == ("cpu", "cuda:0")
    with pytest.raises(ConfigError, match="give --live-devices with 3 devices"):
        choose_devices(3, ["cpu"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert choose_devices(3, None)[0] == ("cpu", "cpu", "cpu")


@pytest.mark.usefixtures("cpu_only")
def test_every_image_runs_all_four_segments_once_and_is_judged_by_its_real_logits(checkpoint):
    dataset = load_dataset(DATA)
    opened = LiveSetup.open(checkpoint, 2, (0.25, 0.5, 0.75, 1.0))
    assert opened.devices == ("cpu", "cpu") and opened.data == DATA
    # Five test images for twelve arrivals: image i carries test image i mod 5.
    setup = LiveSetup(checkpoint, opened.model, DATA, dataset.test_images[:5],
                      dataset.test_labels[:5], ("cpu", "cpu"), "test")  # fmt: skip
    scenario = ScenarioConfig(servers=("cpu", "cpu"), num_images=12, rate_per_s=200.0)
    cluster = build_cluster(scenario, 1, live=setup)
    segments_run = []
    for server in cluster.servers:
        submit = server.submit

        def counting(segment, width, prev_width, done, payload=None, submit=submit):
            segments_run.append(segment)
            submit(segment, width, prev_width, done, payload=payload)

        server.submit = counting
    try:
        cluster.run(ROUTERS.create("random", seed=1))
    finally:
        cluster.close()
    assert sorted(image.image_id for image in cluster.completed) == list(range(12))
    assert sorted(segments_run) == sorted(list(range(4)) * 12)
    assert sum(outcome.requests for _, outcome in cluster.block_outcomes) == 48
    with torch.inference_mode():
        for image in cluster.completed:
            assert len(image.widths) == 4
            logits = opened.model(dataset.test_images[image.image_id % 5][None], image.widths)[0]
            expected = int(logits.argmax()) == int(dataset.test_labels[image.image_id % 5])
            top2 = logits.topk(2).values
            assert image.correct == expected or float(top2[0] - top2[1]) < 1e-4
    assert setup.energy_sources <= {"power-model", "rapl"} and setup.energy_sources


def invoke(*args):
    result = runner.invoke(typer_app, ["slim", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.usefixtures("cpu_only")
def test_experiment_and_evaluate_router_run_live_end_to_end(checkpoint, tmp_path):
    live = ["--live", "--checkpoint", str(checkpoint), "--images", "8", "--rate", "100"]
    out = invoke("experiment", *live, "--seeds", "0", "--steps", "32", "--out", str(tmp_path))
    assert "3 servers on cpu, cpu, cpu" in out and "loopback" in out
    assert "Table III" in out and "Table V" in out and "source power-model" in out
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["backend"] == "live"
    for policy in ("random", "ppo-efficiency", "ppo-balanced"):
        assert results["aggregated"][policy]["images_completed"]["mean"] == 8
    router = tmp_path / "routers" / "ppo-balanced-seed0.pt"
    out = invoke("evaluate-router", "round-robin", str(router), *live, "--seeds", "0",
                 "--live-devices", "cpu,cpu,cpu", "--out", str(tmp_path / "eval"))  # fmt: skip
    assert "servers on cpu, cpu, cpu (as given)" in out
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert results["round-robin"]["images_completed"]["mean"] == 8
    assert results["ppo-balanced-seed0"]["images_completed"]["mean"] == 8


def fails_with(*args):
    result = runner.invoke(typer_app, ["slim", *args, "--images", "4"])
    assert result.exit_code != 0
    return result.exception


def test_live_errors_name_what_is_wrong(checkpoint, tmp_path):
    error = fails_with("experiment", "--live")
    assert isinstance(error, ConfigError) and "--live needs --checkpoint" in str(error)
    error = fails_with("experiment", "--live", "--checkpoint", str(checkpoint), "--rate", "0")
    assert isinstance(error, ConfigError) and "--rate: expected a positive rate" in str(error)
    error = fails_with("evaluate-router", "random", "--checkpoint", str(checkpoint))
    assert isinstance(error, ConfigError) and "only apply with --live" in str(error)
    missing = tmp_path / "none.pt"
    error = fails_with("evaluate-router", "random", "--live", "--checkpoint", str(missing))
    assert isinstance(error, DataError) and "checkpoint not found" in str(error)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    error = fails_with("experiment", "--live", "--checkpoint", str(corrupt))
    assert isinstance(error, DataError) and "corrupt.pt: not a readable checkpoint" in str(error)
    error = fails_with("evaluate-router", "random", "--live", "--checkpoint", str(checkpoint),
                       "--live-devices", "cpu,cpu")  # fmt: skip
    assert isinstance(error, ConfigError) and "2 server(s), but the scenario has 3" in str(error)
    if not torch.cuda.is_available():
        error = fails_with("experiment", "--live", "--checkpoint", str(checkpoint),
                           "--live-devices", "cpu,cuda:1,cpu")  # fmt: skip
        assert isinstance(error, ConfigError) and "'cuda:1': CUDA is not available" in str(error)


@pytest.mark.usefixtures("cpu_only")
def test_the_scenario_comparison_runs_live_with_predictions_for_the_slo_rules(checkpoint, tmp_path):
    """`experiment --scenarios --live` (issue 19, item 6) at a tiny budget: the rules that read
    predicted completion times get them from the scenario's device models."""
    scenario = tmp_path / "live-tiny.yaml"
    scenario.write_text(
        "servers: [cpu, cpu]\nlink: loopback\narrival: bursty\nrate_per_s: 100\n"
        "num_images: 8\nslo_ms: 500\nwarmup_fraction: 0\n"
    )
    out = invoke("experiment", "--scenarios", str(scenario), "--live", "--checkpoint",
                 str(checkpoint), "--seeds", "2", "--routers", "constant-best,slackfit,random",
                 "--out", str(tmp_path / "out"))  # fmt: skip
    assert "2 servers on cpu, cpu" in out and "source power-model" in out
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["backend"] == "live" and "live-tiny" in document["live"]
    (result,) = document["results"]
    assert set(result["routers"]) == {"constant-best", "slackfit", "random"}
    for router in result["routers"].values():
        assert router["seeds"] == 2 and 0.0 <= router["slo_attainment"]["mean"] <= 1.0
    # constant-best asks the device model for the fastest server: both are "cpu", so server 0.
    assert result["routers"]["constant-best"]["executed_widths"]["1"] == 1.0
