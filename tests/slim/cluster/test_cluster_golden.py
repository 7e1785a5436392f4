"""Golden runs of the whole simulated cluster path (router state, links, executors, bookkeeping).

Recorded before the cluster's speed work (issue 19: >= 200k segment-requests per CPU second); an
optimisation must leave every image's latency, energy, widths and correctness, every utilisation
sample, every server's energy and every state the router saw exactly as they were. The router is
defined here (a seeded cycle through the choices, reading the state's predictions), so a change
of the shipped routers cannot move these figures.

After a deliberate change of the results, rewrite the file with
``.venv/bin/python -m tests.slim.cluster.test_cluster_golden`` and say why in the commit.
"""

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from hetsched.slim.routers import Router, RouterState, RoutingDecision
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster

GOLDEN_PATH = Path(__file__).with_name("golden_cluster.json")

CASES: dict[str, dict[str, Any]] = {
    "paper-wifi": dict(num_images=200, rate_per_s=300.0),
    "lan-light": dict(num_images=300, rate_per_s=60.0, link="ethernet-10g", arrival="poisson"),
    "lan-overload": dict(
        num_images=600,
        rate_per_s=3000.0,
        link="ethernet-1g",
        servers=("rtx-2080-ti", "gtx-980-ti", "gtx-980-ti", "cpu"),
        slo_ms=100.0,
    ),
}


class CyclingRouter(Router):
    """Seeded choices; every third decision follows the least predicted image completion."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seen: list[list[float]] = []

    def decide(self, state: RouterState) -> RoutingDecision:
        self.seen.append(
            [
                state.now_s,
                state.fifo_length,
                state.head_slack_s if state.head_slack_s != float("inf") else -1.0,
                *(v.queue_length for v in state.servers),
                *(v.backlog_s for v in state.servers),
                *(t for v in state.servers for t in v.image_done_s),
            ]
        )
        group = self.rng.choice(state.group_sizes)
        if self.rng.random() < 1 / 3:
            best = min(range(len(state.servers)), key=lambda i: state.servers[i].image_done_s[-1])
            return RoutingDecision(best, state.widths[-1], group)
        server = self.rng.randrange(len(state.servers))
        return RoutingDecision(server, self.rng.choice(state.widths), group)


def cluster_trace(case: str) -> dict[str, Any]:
    cluster = build_cluster(ScenarioConfig(**CASES[case]), seed=3)
    router = CyclingRouter(seed=3)
    cluster.run(router)
    return {
        "images": [
            [c.image_id, c.latency_s, c.energy_j, list(c.widths), c.correct, c.met_slo]
            for c in cluster.completed
        ],
        "utilization_variances": cluster.utilization_variances,
        "end_s": cluster.clock.now_s(),
        "server_energy_j": [server.energy()[0] for server in cluster.servers],
        "server_batches": [server.record.batches for server in cluster.servers],
        "states": router.seen,
        "decisions": cluster.decisions,
    }


def summary(trace: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(trace, sort_keys=True)
    return {
        "images": len(trace["images"]),
        "decisions": trace["decisions"],
        "end_s": trace["end_s"],
        "energy_j": trace["server_energy_j"],
        "batches": trace["server_batches"],
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


@pytest.mark.parametrize("case", list(CASES))
def test_cluster_matches_the_golden_run(case):
    expected = json.loads(GOLDEN_PATH.read_text())[case]
    actual = summary(cluster_trace(case))
    assert {k: v for k, v in actual.items() if k != "sha256"} == {
        k: v for k, v in expected.items() if k != "sha256"
    }
    assert actual["sha256"] == expected["sha256"], "same figures, but some detail of the run moved"


if __name__ == "__main__":
    GOLDEN_PATH.write_text(
        json.dumps({case: summary(cluster_trace(case)) for case in CASES}, indent=1) + "\n"
    )
    print(f"wrote {GOLDEN_PATH}")
