"""Tiny-budget end-to-end runs of train-router, evaluate-router and experiment."""

import json

import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import DataError
from hetsched.slim.model.accuracy import AccuracyTable
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.router_training.scenario_mix import training_mix
from hetsched.slim.routers import ROUTERS

runner = CliRunner()
TINY = ["--images", "16"]


def invoke(*args):
    result = runner.invoke(typer_app, ["slim", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_train_then_evaluate_router(tmp_path):
    invoke("train-router", "--method", "ppo", "--preset", "balanced", "--steps", "96",
           "--rollout", "32", "--out", str(tmp_path), *TINY)  # fmt: skip
    checkpoint = tmp_path / "ppo-balanced.pt"
    assert checkpoint.is_file()
    curves = json.loads((tmp_path / "ppo-balanced-curves.json").read_text())
    assert len(curves) == 3 and "losses/policy_loss" in curves[0]
    assert (tmp_path / "ppo-balanced-curves.png").is_file()
    out = invoke("evaluate-router", "random", str(checkpoint), "--seeds", "0,1",
                 "--out", str(tmp_path / "eval"), *TINY)  # fmt: skip
    assert "Table III" in out
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert set(results) == {"random", "ppo-balanced"}
    assert results["random"]["images_completed"]["mean"] == 16


def test_experiment_prints_tables_iii_to_v(tmp_path):
    out = invoke("experiment", "--seeds", "0", "--steps", "64", "--out", str(tmp_path),
                 "--baselines", "random,least-loaded", *TINY)  # fmt: skip
    for table in ("Table III", "Table IV", "Table V"):
        assert table in out
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["aggregated"]) == {
        "random",
        "least-loaded",
        "ppo-efficiency",
        "ppo-balanced",
    }
    assert (tmp_path / "comparison.png").is_file()


def test_train_the_learned_router_then_resume(tmp_path):
    args = ["train-router", "--scenarios", "lan-1.5x", "--advisors", "jsq-0.25,slackfit",
            "--images", "40", "--demo-episodes", "1", "--rollout", "32",
            "--out", str(tmp_path)]  # fmt: skip
    out = invoke(*args, "--steps", "64")
    assert "learned router vs the rules it saw" in out and "slackfit" in out
    assert (tmp_path / "learned.pt").is_file() and (tmp_path / "learned-curves.png").is_file()
    invoke(*args, "--steps", "96", "--resume")
    rows = (tmp_path / "learned-curves.csv").read_text().splitlines()
    assert len(rows) == 1 + 1 + 3 + 2  # header, cloning, 3 DAgger rounds, 64 + 32 PPO decisions


def test_resume_from_a_foreign_training_state_is_a_one_line_data_error(tmp_path):
    from hetsched.core.errors import DataError

    args = ["train-router", "--scenarios", "lan-1.5x", "--advisors", "jsq-0.25,slackfit",
            "--images", "40", "--demo-episodes", "1", "--rollout", "32",
            "--out", str(tmp_path), "--steps", "64", "--resume"]  # fmt: skip
    for data in (b"", b"hello\n", b"root:x:0:0:root:/root:/bin/bash\n"):
        (tmp_path / "train-state.pt").write_bytes(data)
        result = runner.invoke(typer_app, ["slim", *args])
        assert isinstance(result.exception, DataError), result.output
        assert "not a training state" in str(result.exception)


def test_a_foreign_router_checkpoint_stops_the_experiment_with_one_line(tmp_path):
    from hetsched.core.errors import DataError

    (tmp_path / "passwd.pt").write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    result = runner.invoke(typer_app, ["slim", "experiment", "--scenarios", "bursty-3x",
                                       "--seeds", "1", "--routers", "learned", "--images", "50",
                                       "--router-checkpoint", f"learned={tmp_path / 'passwd.pt'}",
                                       "--out", str(tmp_path / "out")])  # fmt: skip
    assert isinstance(result.exception, DataError), result.output
    assert "not a router checkpoint" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_train_the_advice_router_with_gae(tmp_path):
    invoke("train-router", "--scenarios", "lan-1.5x", "--advisors", "jsq-0.25,slackfit",
           "--images", "40", "--demo-episodes", "2", "--rollout", "32", "--steps", "64",
           "--action", "advice", "--teacher", "per-episode", "--advantage", "gae",
           "--dagger-rounds", "1",
           "--out", str(tmp_path))  # fmt: skip
    router = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt")
    assert router.encoder.kind == "advice" and router.encoder.head_sizes == (2,)
    rows = (tmp_path / "learned-curves.csv").read_text().splitlines()
    assert len(rows) == 1 + 1 + 1 + 1  # header, cloning, a DAgger round, 64 PPO decisions


def test_train_the_advice_router_with_the_rollout_teacher(tmp_path):
    out = invoke("train-router", "--scenarios", "bursty-3x", "--advisors", "jsq-0.25,jsq-0.5",
                 "--images", "300", "--demo-episodes", "1", "--dagger-rounds", "1",
                 "--teacher", "rollout", "--rollout-chunk", "30", "--rollout-horizon", "0",
                 "--out", str(tmp_path))  # fmt: skip
    assert "learned router vs the rules it saw" in out and "jsq-0.5" in out
    router = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt")
    assert router.metadata["config"]["teacher"] == "rollout"
    assert router.metadata["config"]["rollout_chunk"] == 30
    assert router.metadata["config"]["rollout_horizon"] is None  # 0: to the episode's end


def test_train_the_advice_router_with_a_rollout_teacher_on_sampled_futures(tmp_path):
    out = invoke("train-router", "--scenarios", "bursty-3x", "--advisors", "jsq-0.25,jsq-0.5",
                 "--images", "300", "--demo-episodes", "1", "--dagger-rounds", "1",
                 "--teacher", "rollout", "--rollout-chunk", "60", "--rollout-horizon", "120",
                 "--rollout-futures", "sampled", "--rollout-samples", "2",
                 "--out", str(tmp_path))  # fmt: skip
    assert "learned router vs the rules it saw" in out
    config = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt").metadata["config"]
    assert (config["rollout_futures"], config["rollout_samples"]) == ("sampled", 2)


def test_train_the_advice_router_with_the_attainment_target_teacher(tmp_path):
    out = invoke("train-router", "--scenarios", "bursty-3x", "--advisors", "jsq-0.25,jsq-0.5",
                 "--images", "200", "--demo-episodes", "2", "--dagger-rounds", "0",
                 "--teacher", "per-episode", "--teacher-choice", "attainment-target",
                 "--teacher-tolerance", "0.001", "--teacher-target", "0.999",
                 "--out", str(tmp_path))  # fmt: skip
    assert "learned router vs the rules it saw" in out
    router = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt")
    config = router.metadata["config"]
    assert config["teacher_choice"] == "attainment-target"
    assert (config["teacher_tolerance"], config["teacher_target"]) == (0.001, 0.999)


def test_train_router_follows_the_scenarios_width_mode_unless_told(tmp_path):
    common = ("train-router", "--scenarios", "bursty-3x", "--advisors", "jsq-0.25,jsq-0.5",
              "--images", "100", "--demo-episodes", "1", "--dagger-rounds", "0")  # fmt: skip
    invoke(*common, "--out", str(tmp_path / "file"))
    invoke(*common, "--free-best-fit", "--out", str(tmp_path / "paper-rule"))
    saved = ROUTERS.create("learned", checkpoint=tmp_path / "file" / "learned.pt").metadata
    told = ROUTERS.create("learned", checkpoint=tmp_path / "paper-rule" / "learned.pt").metadata
    assert saved["config"]["exact_width"] is None and told["config"]["exact_width"] is False
    mix = training_mix(["bursty-3x"], 100, exact_width=False)
    assert not mix.scenarios["bursty-3x"].executor.exact_width
    assert training_mix(["bursty-3x"], 100).scenarios["bursty-3x"].executor.exact_width


def test_train_router_learns_on_the_served_models_measured_accuracy_table(tmp_path):
    """Live, a router routes the model it serves: --accuracy-table replaces every training
    scenario's table (issue 19, item 6: routers trained on the paper's table lose live)."""
    torch.manual_seed(0)
    images, labels = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    table = AccuracyTable.measure(SlimResNet(num_classes=10).eval(), images, labels, batch_size=4)
    path = tmp_path / "accuracy_table.json"
    table.to_json(path)
    mix = training_mix(["bursty-3x", "lan-3x"], 60, accuracy_table=str(path))
    assert {s.accuracy_table for s in mix.scenarios.values()} == {str(path)}
    assert training_mix(["bursty-3x"], 60).scenarios["bursty-3x"].accuracy_table == "paper"
    common = ("train-router", "--scenarios", "bursty-3x", "--advisors", "jsq-0.25,jsq-0.5",
              "--images", "60", "--demo-episodes", "1", "--dagger-rounds", "0")  # fmt: skip
    invoke(*common, "--accuracy-table", str(path), "--out", str(tmp_path / "r"))
    saved = ROUTERS.create("learned", checkpoint=tmp_path / "r" / "learned.pt").metadata
    assert saved["config"]["accuracy_table"] == str(path)
    result = runner.invoke(
        typer_app,
        ["slim", *common, "--accuracy-table", str(tmp_path / "absent.json"), "--out", "/x"],
    )
    assert isinstance(result.exception, DataError) and "absent.json" in str(result.exception)


def test_train_router_options_of_the_other_method_and_bad_names_are_refused():
    from hetsched.core.errors import ConfigError, UnknownNameError

    for args in (["--method", "ppo", "--resume"], ["--scenario", "paper"], ["--method", "x"],
                 ["--scenarios", "failure"], ["--method", "ppo", "--teacher", "slackfit"],
                 ["--teacher", "nope"], ["--advisors", "nope"], ["--method", "ppo",
                 "--action", "advice"], ["--method", "ppo", "--advantage", "gae"],
                 ["--action", "nope"], ["--advantage", "nope"], ["--method", "ppo",
                 "--dagger-rounds", "1"], ["--dagger-rounds", "-1"],
                 ["--action", "advice", "--teacher", "least-loaded"],
                 ["--method", "ppo", "--rollout-chunk", "5"],
                 ["--rollout-chunk", "0"], ["--rollout-horizon", "-1"],
                 ["--teacher-choice", "nope"], ["--teacher-target", "1.5"],
                 ["--teacher-tolerance", "-0.1"], ["--rollout-futures", "oracle"],
                 ["--rollout-samples", "0"], ["--rollout-futures", "sampled"],
                 ["--method", "ppo", "--rollout-futures", "sampled"],
                 ["--method", "ppo", "--teacher-target", "0.9"]):  # fmt: skip
        result = runner.invoke(typer_app, ["slim", "train-router", *args, "--out", "/nonexistent"])
        assert isinstance(result.exception, ConfigError | UnknownNameError), args
        if args[0].startswith(("--teacher-t", "--rollout-f")):
            assert args[0][2:].replace("-", "_") in str(result.exception), result.exception


def test_bad_seeds_and_unknown_router_are_clean_errors(tmp_path):
    from hetsched.core.errors import ConfigError, UnknownNameError

    result = runner.invoke(typer_app, ["slim", "experiment", "--seeds", "a,b"])
    assert isinstance(result.exception, ConfigError)
    result = runner.invoke(typer_app, ["slim", "evaluate-router", "fastest", *TINY])
    assert isinstance(result.exception, UnknownNameError)
    result = runner.invoke(typer_app, ["slim", "experiment", "--baselines", "random,fast"])
    assert isinstance(result.exception, UnknownNameError)
