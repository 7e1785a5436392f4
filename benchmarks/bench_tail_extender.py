"""Tail extender latency: a 100-node ``POST /prioritize`` over loopback HTTP (target p99 <= 5 ms).

Run: ``.venv/bin/python benchmarks/bench_tail_extender.py [--repo runs/tail/models] [--requests N]
[--out F.json]``

The request is the upstream ExtenderArgs shape (full v1.Node objects, as kube-scheduler sends when
``nodeCacheCapable: false``) for a ResNet-50 pod; the server predicts P90 for all 100 nodes with the
repository's latest regressor in one batch. Client and server share this machine and this process
(the client's work and garbage count too); one keep-alive connection; latencies are client-side
round trips. The first request is reported apart (it is what a cold server would answer slowly),
as are full garbage collections during the timed requests (each walks every tracked object) and the
scoring function alone. The load average is printed because other jobs share the cores.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from hetsched.tail.extender import handle_prioritize, serve_in_thread
from hetsched.tail.regressors import ModelRepository
from hetsched.tail.scoring import P90Scorer

FIXTURE = Path(__file__).resolve().parents[1] / "tests/tail/fixtures/extender_args_nodes.json"
WARM_UP_REQUESTS = 20


def hundred_node_args() -> dict:
    """The fixture's pod with 100 nodes cycling through the Table I shapes."""
    args = json.loads(FIXTURE.read_text())
    template = args["Nodes"]["items"]
    items = []
    for i in range(100):
        node = copy.deepcopy(template[i % len(template)])
        node["metadata"]["name"] = f"node{i:03d}"
        items.append(node)
    args["Nodes"]["items"] = items
    return args


def timed_ms(call: Callable[[], object], n: int) -> list[float]:
    """Wall time of ``n`` calls in milliseconds."""
    values = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        values.append((time.perf_counter() - start) * 1e3)
    return values


def summary(values: list[float]) -> dict[str, float]:
    """p50/p90/p99/max in ms: the issue's target is on p99, the max shows stalls."""
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"n": len(values), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": max(values)}


def full_collections(work: Callable[[], object]) -> tuple[object, int]:
    """``work()``'s result and how many full (generation 2) collections ran during it."""
    count = 0

    def on_gc(phase: str, info: dict) -> None:
        nonlocal count
        count += phase == "start" and info["generation"] == 2

    gc.callbacks.append(on_gc)
    try:
        return work(), count
    finally:
        gc.callbacks.remove(on_gc)


def http_latencies(scorer: P90Scorer, args: dict, requests: int) -> tuple[float, list[float], int]:
    """The first request's and then ``requests`` timed round trips' latency (ms), and the full
    collections during the timed ones."""
    server = serve_in_thread(scorer)
    url = f"http://127.0.0.1:{server.server_address[1]}/prioritize"
    body = json.dumps(args).encode()
    headers = {"Content-Type": "application/json"}

    def post() -> None:
        reply = client.post(url, content=body, headers=headers)
        assert reply.status_code == 200

    try:
        with httpx.Client() as client:
            first = timed_ms(post, 1)[0]
            timed_ms(post, WARM_UP_REQUESTS - 1)  # the connection's and the caches' warm-up
            latencies, full_gcs = full_collections(lambda: timed_ms(post, requests))
            assert len(client.post(url, content=body, headers=headers).json()) == 100
    finally:
        server.shutdown()
    return first, latencies, full_gcs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path("runs/tail/models"))
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    opts = parser.parse_args()
    fitted, meta = ModelRepository(opts.repo).load()
    scorer = P90Scorer(fitted)
    args = hundred_node_args()
    first_ms, http_ms, http_full_gcs = http_latencies(scorer, args, opts.requests)
    core_ms = timed_ms(lambda: handle_prioritize(scorer, args), opts.requests)
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "regressor": f"{meta['regressor']} {meta['version']}",
        "request_kib": len(json.dumps(args)) / 1024,
        "load_average": os.getloadavg(),
        "first_request_ms": first_ms,
        "http_round_trip": summary(http_ms),
        "http_full_collections": http_full_gcs,
        "scoring_only": summary(core_ms),
    }
    print(
        f"machine: {result['machine']}, Python {result['python']}; regressor "
        f"{result['regressor']}; {result['request_kib']:.0f} KiB request; load average "
        + " ".join(f"{v:.2f}" for v in result["load_average"])
    )
    print(
        f"first request {first_ms:.2f} ms (cold connection); full GCs while timed {http_full_gcs}"
    )
    for name in ("http_round_trip", "scoring_only"):
        s = result[name]
        print(
            f"{name:16s} n={s['n']}  p50 {s['p50_ms']:.2f}  p90 {s['p90_ms']:.2f}  "
            f"p99 {s['p99_ms']:.2f}  max {s['max_ms']:.2f} ms"
        )
    if opts.out:
        opts.out.write_text(json.dumps(result, indent=1))
        print(f"written: {opts.out}")


if __name__ == "__main__":
    main()
