"""Rollouts on Ray actors (one shared local session for the module, skipped without Ray): one
actor, two actors and the in-process worker train the same agent; the command line's
``--workers`` gives the same run as without it. On the 2-core CI only the mechanism is tested;
the speed-up is measured by benchmarks/bench_jobs_rollouts.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from hetsched.cli import typer_app
from hetsched.core.errors import HetschedError
from hetsched.jobs.rl.train_config import TrainConfig
from hetsched.jobs.rl.training import train_agent

ray = pytest.importorskip("ray", reason="Ray rollouts need ray (a core dependency)")
ray_rollouts = pytest.importorskip("hetsched.jobs.rl.ray_rollouts")

TINY = TrainConfig(
    epochs=2,
    trajectories_per_epoch=4,
    trajectories_per_update=4,
    episode_jobs=64,
    max_queue=32,
    seed=5,
)
DATA = ["--synthetic", "philly", "--jobs", "1500", "--cluster-fraction", "0.02"]
CLI_TINY = [
    "--epochs", "1", "--trajectories-per-epoch", "3", "--trajectories-per-update", "3",
    "--episode-jobs", "64", "--max-queue", "32",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """As the command line and the Ray actors run: one intra-op thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _weights_equal(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_one_and_two_actors_train_the_in_process_agent(ray_session, small, tmp_path: Path):
    jobs, cluster = small
    runs = {}
    for workers in (1, 2):
        rollouts = ray_rollouts.RayRollouts(jobs, cluster, TINY, workers)
        assert not rollouts.owns_ray  # joined the module's session, does not shut it down
        try:
            runs[workers] = train_agent(
                jobs, cluster, TINY, tmp_path / f"w{workers}", None, rollouts
            )
        finally:
            rollouts.close()
    in_process = train_agent(jobs, cluster, TINY, tmp_path / "w0")
    assert ray.is_initialized()
    assert runs[1].history == runs[2].history == in_process.history
    assert _weights_equal(runs[1].agent.state_dict(), runs[2].agent.state_dict())
    assert _weights_equal(runs[2].agent.state_dict(), in_process.agent.state_dict())
    assert in_process.history[-1]["decisions_per_episode"] > 0


def test_bad_settings_fail_with_one_line_before_ray_starts(small):
    jobs, cluster = small
    too_long = TINY.model_copy(update={"episode_jobs": len(jobs) + 1})
    with pytest.raises(HetschedError, match="episodes of"):
        ray_rollouts.RayRollouts(jobs, cluster, too_long, 2)
    with pytest.raises(HetschedError, match="at least one worker"):
        ray_rollouts.RayRollouts(jobs, cluster, TINY, 0)
    negative = ray_rollouts.open_rollouts(jobs, cluster, TINY, workers=-1)
    with pytest.raises(HetschedError, match="--workers must be >= 0"), negative:
        pass
    address_alone = ray_rollouts.open_rollouts(jobs, cluster, TINY, workers=0, address="auto")
    with pytest.raises(HetschedError, match="--address needs --workers >= 1"), address_alone:
        pass


def test_a_bad_ray_address_fails_fast_with_one_line():
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(HetschedError, match=r"cannot reach Ray at 127\.0\.0\.1"):
        ray_rollouts.check_reachable(f"127.0.0.1:{port}")
    with pytest.raises(HetschedError, match=r"cannot reach Ray at ray://127\.0\.0\.1"):
        ray_rollouts.check_reachable(f"ray://127.0.0.1:{port}")
    for bad in ("not an address", "host:", "host:99999999999999999999"):
        with pytest.raises(HetschedError, match="Ray"):
            ray_rollouts.check_reachable(bad)
    ray_rollouts.check_reachable("auto")  # left to Ray


def test_the_command_line_trains_the_same_agent_with_workers(ray_session, tmp_path: Path):
    runner = CliRunner()
    for name, extra in (("plain", []), ("ray", ["--workers", "1"])):
        args = ["jobs", "train", *DATA, *CLI_TINY, "--out", str(tmp_path / name), *extra]
        result = runner.invoke(typer_app, args)
        assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    plain, on_ray = tmp_path / "plain", tmp_path / "ray"
    assert (plain / "training.csv").read_text() == (on_ray / "training.csv").read_text()
    first = torch.load(plain / "agent.pt", weights_only=True)["state_dict"]
    second = torch.load(on_ray / "agent.pt", weights_only=True)["state_dict"]
    assert _weights_equal(first, second)
    assert '"rollout_workers": 1' in (on_ray / "run.json").read_text()
    assert "workers are busy" not in result.output  # 1 worker, 3 trajectories per update
