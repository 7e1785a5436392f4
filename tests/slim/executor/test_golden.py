"""Golden traces: the simulator's exact results on small seeded workloads, pinned in a file.

The traces were recorded before the simulator's speed work (issue 3's ≥ 200k requests per CPU
second); any optimisation of the executor, the simulated backend, the event loop or the replay
path must leave every completion time, executed width, batch, telemetry sample and joule exactly
as it was. Each trace is pinned by a few readable figures (so a failure says what moved) and the
SHA-256 of its full JSON (so nothing else may move either).

After a deliberate change of the model's results, rewrite the file with
``.venv/bin/python -m tests.slim.executor.test_golden`` and say why in the commit.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.routers import ROUTERS
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster, model_costs
from hetsched.slim.sim.simulated_backend import SimulatedBackend
from hetsched.slim.sim.workload import drive, replay, segment_workload

GOLDEN_PATH = Path(__file__).with_name("golden_traces.json")

SERVER_CASES: dict[str, dict[str, Any]] = {
    # name: device, arrival rate r, pattern, simulated seconds, feed, executor knobs
    "light": dict(device="rtx-2080-ti", rate=2_000, pattern="poisson", duration_s=0.1),
    "moderate": dict(device="rtx-2080-ti", rate=10_000, pattern="poisson", duration_s=0.05),
    "near-saturation": dict(device="rtx-2080-ti", rate=20_000, pattern="poisson", duration_s=0.05),
    "overload": dict(device="rtx-2080-ti", rate=50_000, pattern="poisson", duration_s=0.03),
    # Scale-up (small Q_th), a tight M_max, the U_blk block and idle unloads between bursts.
    "bursty-tight": dict(
        device="gtx-980-ti",
        rate=6_000,
        pattern="bursty",
        duration_s=0.3,
        knobs=dict(
            max_batch=4,
            scale_queue_threshold=3,
            scale_max_new=3,
            vram_cap_bytes=50_000_000,
            util_block_pct=60.0,
            idle_unload_s=0.004,
            sample_interval_s=0.001,
        ),
    ),
    # One event per arrival (drive) instead of the replay fast path; payloads name requests.
    "cpu-driven": dict(device="cpu", rate=1_500, pattern="poisson", duration_s=0.2, feed="drive"),
}


def server_trace(
    device: str,
    rate: float,
    pattern: str,
    duration_s: float,
    feed: str = "replay",
    knobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything one seeded executor run produces, in the order it happened."""
    loop = EventLoop()
    config = ExecutorConfig(arrival_rate_per_s=rate, **(knobs or {}))
    backend = SimulatedBackend(DEVICES[device], model_costs(), loop)
    executor = GreedyExecutor(backend, loop, config)
    workload = segment_workload(7, rate, pattern, duration_s, config.widths)
    completions: list[list[Any]] = []
    if feed == "replay":
        replay(workload, executor, loop, lambda width: completions.append([loop.now_s(), width]))
    else:
        server = _IndexedSubmitter(executor, loop, completions)
        drive(workload, server, loop, lambda width: None)
    loop.run()
    record = executor.record
    energy_j, source = executor.energy()
    return {
        "completions": completions,
        "queue_durations_s": record.queue_durations_s,
        "request_durations_s": record.request_durations_s,
        "series": record.series.as_dict(),
        "counts": [record.submitted, record.completed, record.batches, record.loads],
        "unloads": record.unloads,
        "peak_vram_bytes": record.peak_vram_bytes,
        "end_s": loop.now_s(),
        "energy_j": energy_j,
        "energy_source": source,
    }


class _IndexedSubmitter:
    """Submits with payload = arrival index, so each completion names its request."""

    def __init__(self, executor: GreedyExecutor, loop: EventLoop, log: list[list[Any]]) -> None:
        self.executor, self.loop, self.log, self.count = executor, loop, log, 0

    def submit(self, segment, width, prev_width, done) -> None:
        def finished(executed_width: float, index: int) -> None:
            self.log.append([index, self.loop.now_s(), executed_width])

        self.executor.submit(segment, width, prev_width, finished, payload=self.count)
        self.count += 1


def cluster_trace(router: str) -> dict[str, Any]:
    """A small run of the paper's 3-GPU cluster: routing sees the executors' telemetry."""
    scenario = ScenarioConfig(num_images=150, rate_per_s=300.0)
    cluster = build_cluster(scenario, seed=5)
    cluster.run(ROUTERS.create(router, seed=5))
    return {
        "images": [
            [c.image_id, c.latency_s, c.energy_j, list(c.widths), c.correct]
            for c in cluster.completed
        ],
        "utilization_variances": cluster.utilization_variances,
        "end_s": cluster.clock.now_s(),
        "server_energy_j": [server.energy()[0] for server in cluster.servers],
        "server_batches": [server.record.batches for server in cluster.servers],
    }


def summary(name: str, trace: dict[str, Any]) -> dict[str, Any]:
    """Readable figures of a trace, plus the SHA-256 of all of it."""
    text = json.dumps(trace, sort_keys=True)
    if name.startswith("cluster"):
        figures = {
            "images": len(trace["images"]),
            "end_s": trace["end_s"],
            "energy_j": trace["server_energy_j"],
            "batches": trace["server_batches"],
        }
    else:
        figures = {
            "counts": trace["counts"],
            "unloads": trace["unloads"],
            "end_s": trace["end_s"],
            "energy_j": trace["energy_j"],
            "last_completion": trace["completions"][-1],
        }
    return {**figures, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def all_traces() -> dict[str, dict[str, Any]]:
    traces = {name: server_trace(**case) for name, case in SERVER_CASES.items()}
    for router in ("least-loaded", "random"):
        traces[f"cluster-{router}"] = cluster_trace(router)
    return traces


@pytest.fixture(scope="module")
def golden() -> dict[str, dict[str, Any]]:
    return json.loads(GOLDEN_PATH.read_text())


@pytest.mark.parametrize("name", [*SERVER_CASES, "cluster-least-loaded", "cluster-random"])
def test_results_match_the_golden_trace(golden, name):
    trace = server_trace(**SERVER_CASES[name]) if name in SERVER_CASES else cluster_trace(name[8:])
    expected = golden[name]
    actual = summary(name, trace)
    assert {k: v for k, v in actual.items() if k != "sha256"} == {
        k: v for k, v in expected.items() if k != "sha256"
    }
    assert actual["sha256"] == expected["sha256"], "same figures, but some detail of the run moved"


def test_golden_cases_exercise_the_whole_algorithm(golden):
    tight, overload = golden["bursty-tight"], golden["overload"]
    assert tight["unloads"] > 0 and tight["counts"][3] > tight["unloads"] // 2  # loads, unloads
    submitted, completed, batches, _loads = overload["counts"]
    assert submitted == completed > 1000 and completed / batches > 10  # full batches


if __name__ == "__main__":
    traces = all_traces()
    GOLDEN_PATH.write_text(
        json.dumps({name: summary(name, trace) for name, trace in traces.items()}, indent=1) + "\n"
    )
    print(f"wrote {GOLDEN_PATH}")
