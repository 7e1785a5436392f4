"""Tail extender latency: a 100-node ``POST /prioritize`` over loopback HTTP (target p99 <= 5 ms).

Run: ``.venv/bin/python benchmarks/bench_tail_extender.py [--repo runs/tail/models] [--requests N]``

The request is the upstream ExtenderArgs shape (full v1.Node objects, as kube-scheduler sends when
``nodeCacheCapable: false``) for a ResNet-50 pod; the server predicts P90 for all 100 nodes with the
repository's latest regressor in one batch. Client and server share this machine; one keep-alive
connection; latencies are client-side round trips. Also times the scoring function alone.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import time
from pathlib import Path

import httpx
import numpy as np

from hetsched.tail.extender import handle_prioritize, serve_in_thread
from hetsched.tail.regressors import ModelRepository
from hetsched.tail.scoring import P90Scorer

FIXTURE = Path(__file__).resolve().parents[1] / "tests/tail/fixtures/extender_args_nodes.json"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path("runs/tail/models"))
    parser.add_argument("--requests", type=int, default=500)
    opts = parser.parse_args()
    fitted, meta = ModelRepository(opts.repo).load()
    scorer = P90Scorer(fitted)
    args = hundred_node_args()
    server = serve_in_thread(scorer)
    url = f"http://127.0.0.1:{server.server_address[1]}/prioritize"
    body = json.dumps(args).encode()
    headers = {"Content-Type": "application/json"}
    with httpx.Client() as client:
        for _ in range(20):  # warm-up: connection, model caches
            client.post(url, content=body, headers=headers)
        http_ms = []
        for _ in range(opts.requests):
            start = time.perf_counter()
            reply = client.post(url, content=body, headers=headers)
            http_ms.append((time.perf_counter() - start) * 1e3)
            assert reply.status_code == 200 and len(reply.json()) == 100
    server.shutdown()
    core_ms = []
    for _ in range(opts.requests):
        start = time.perf_counter()
        handle_prioritize(scorer, args)
        core_ms.append((time.perf_counter() - start) * 1e3)
    print(
        f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}; "
        f"regressor {meta['regressor']} {meta['version']}; {len(body) / 1024:.0f} KiB request"
    )
    for name, values in (("HTTP round trip", http_ms), ("scoring only", core_ms)):
        p50, p99 = np.percentile(values, [50, 99])
        print(
            f"{name:16s} n={len(values)}  p50 {p50:.2f} ms  p99 {p99:.2f} ms  "
            f"max {max(values):.2f} ms"
        )


if __name__ == "__main__":
    main()
