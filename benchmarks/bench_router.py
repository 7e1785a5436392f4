"""Slim router decision latency on CPU: state build + forward + sample (target <= 0.1 ms).

Run: ``.venv/bin/python benchmarks/bench_router.py [--decisions 20000]``

1. On the paper's 3-GPU scenario, mid-run (a bursty workload half routed), times the pieces of one
   PPO decision: the cluster's state snapshot (telemetry of 3 servers), the eq. (1) encoding, the
   network forward and the per-head draws; and the whole ``state() + decide()``. Random routing is
   timed for reference. One torch thread.
2. Batched: the forward of B encoded states at once (as when many simulated clusters are stepped in
   lockstep), per decision.
3. Whole-simulation speed: decisions per second of a full evaluation run (random vs PPO).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.ppo import PPORouter, new_policy
from hetsched.slim.sim.scenario import ScenarioConfig, build_cluster, encoder_for


def per_call_us(fn, n: int) -> float:
    """Best of 3 timings of ``n`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20_000, help="calls per timing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}")
    scenario = ScenarioConfig()
    encoder = encoder_for(scenario)
    router = PPORouter(policy=new_policy(encoder), encoder=encoder, seed=0)
    cluster = build_cluster(scenario, seed=0)
    random_router = ROUTERS.create("random", seed=0)
    for _ in range(scenario.num_images):  # route half-way through the workload
        state = cluster.next_state()
        if state is None:
            break
        cluster.route(random_router.decide(state))
    state = cluster.state()
    obs = torch.from_numpy(encoder.encode(state)).unsqueeze(0)
    n = args.decisions

    def forward() -> None:
        with torch.inference_mode():
            router.policy.logits(obs)

    def numpy_forward(state) -> None:
        router.policy.logits_numpy(encoder.encode(state))

    rows = [
        ("state snapshot (cluster.state)", per_call_us(cluster.state, n)),
        ("eq. (1) encoding", per_call_us(lambda: encoder.encode(state), n)),
        ("forward, torch (logits, batch 1)", per_call_us(forward, n)),
        (
            "encoding + forward, NumPy (what decide uses)",
            per_call_us(lambda: numpy_forward(state), n),
        ),
        ("PPO decide (encode + forward + sample)", per_call_us(lambda: router.decide(state), n)),
        ("state + PPO decide", per_call_us(lambda: router.decide(cluster.state()), n)),
        ("state + random decide", per_call_us(lambda: random_router.decide(cluster.state()), n)),
    ]
    print("\n| step | us per decision |\n| --- | ---: |")
    for name, us in rows:
        print(f"| {name} | {us:.1f} |")

    print("\n| batch B | forward us per decision |\n| ---: | ---: |")
    for batch in (1, 16, 64, 256):
        states = torch.from_numpy(np.repeat(encoder.encode(state)[None], batch, 0))

        def batched(states=states) -> None:
            with torch.inference_mode():
                router.policy.logits(states)

        print(f"| {batch} | {per_call_us(batched, max(1, n // batch)) / batch:.2f} |")

    print("\n| router | decisions | wall (s) | decisions/s |\n| --- | ---: | ---: | ---: |")
    for name, make in (
        ("random", lambda: ROUTERS.create("random", seed=1)),
        ("ppo", lambda: PPORouter(policy=router.policy, encoder=encoder, seed=1)),
    ):
        cluster = build_cluster(scenario, seed=1)
        start = time.perf_counter()
        cluster.run(make())
        wall = time.perf_counter() - start
        print(f"| {name} | {cluster.decisions} | {wall:.2f} | {cluster.decisions / wall:.0f} |")


if __name__ == "__main__":
    main()
