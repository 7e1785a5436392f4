"""Tail extender latency: ``POST /prioritize`` (and ``/filter``) at 100, 1,000 and 5,000 nodes.

Run: ``.venv/bin/python benchmarks/bench_tail_extender.py [--repo runs/tail/models]
[--sizes 100,1000,5000] [--requests N] [--out F.json]`` and, for the fuzz run,
``... --fuzz-examples 10000`` (runs tests/tail/test_extender_fuzz.py with that many examples per
verb and prints its counts).

Targets (issue 15): p99 <= 5 ms at 1,000 nodes and <= 15 ms at 5,000.

Modes:
  * ``nodes``: full v1.Node objects (``nodeCacheCapable: false``), the fixture's four Table I
    shapes cycled, no telemetry: ~0.8 KiB of JSON per node, parsed and validated per request.
  * ``nodes-filter``: the same request to ``/filter`` (the pod's SLO is 1,000 ms: every node is
    predicted and kept, and the reply carries all the Node objects back).
  * ``names``: node names only (``nodeCacheCapable: true``); the telemetry cache holds every node
    with its own load (~300-370 regressor rows per request once nodes within 5 % share one).
    The same request repeats, so after the first one the scorer's prediction cache answers, as
    it does between two telemetry refreshes in a cluster.
  * ``names-cold``: the same without the prediction cache: every request asks the regressor, as
    the first request after a telemetry refresh does.
  * ``floor``: the same stack and request as ``names``, answered with a ready reply (body read
    within the limits, nothing parsed or scored): what HTTP and the machine's load cost alone.
  * ``floor-nodes``: the same with the request of ``nodes`` (reading 0.8-3.8 MiB bodies).

The server runs in a child process (spawned: the extender as ``hetsched tail extender`` builds
it, on the shared uvicorn stack); this process is the client: one kept-alive ``http.client``
connection, a pre-encoded body, per-request wall time from sending the request to the reply's
last byte, warm-up requests excluded. On 2 cores client and server then each get a core, as
kube-scheduler and the extender would on their own machines. The same work is then timed
in-process without HTTP (parse, score, encode), in wall and in CPU time: on a machine that other
jobs share, CPU time is what the work itself costs. Without ``--repo`` the regressor is
an XGBoost fitted here on rows whose P90 follows FLOPs / (rate · cores · clock) — latency does not
depend on how good the fit is, only on the model's size.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import multiprocessing
import os
import platform
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

import httpx
import msgspec
import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from hetsched.core.web import ServiceConfig, create_service_app, json_response, read_body
from hetsched.core.web_server import ServiceServer
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import CACHED_ROWS, SHARE_WITHIN, Extender
from hetsched.tail.extender_app import (
    create_extender_app,
    parse_args_json,
    parse_args_with_items,
    warm_up,
)
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.regressors import (
    REGRESSORS,
    FittedRegressor,
    ModelRepository,
)
from hetsched.tail.scoring import NEUTRAL_SCORE, P90Scorer
from hetsched.tail.telemetry import NodeTelemetry

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests/tail/fixtures"
WARM_UP_REQUESTS = 20
SERVER_START_S = 300  # fitting the synthetic regressor and warming up, on a busy machine
FUZZ_TEST = ROOT / "tests/tail/test_extender_fuzz.py"


def synthetic_regressor(seed: int = 0) -> FittedRegressor:
    """XGBoost on 400 rows: P90 = FLOPs / (2e11 · cpu_eff · freq/2.3), 5 % log-normal noise."""
    rng = np.random.default_rng(seed)
    catalog = default_catalog()
    rows = []
    for _ in range(400):
        model = catalog.models[str(rng.choice(catalog.model_keys()))]
        cores, u = float(rng.choice([1, 2, 4, 8, 16])), float(rng.uniform(0, 0.9))
        cpu_eff, freq = cores * (1 - u), 2.3 * (1 - u)
        p90 = model.flops / (2e11 * max(cpu_eff, 0.1) * max(freq / 2.3, 0.1))
        row = {"size_mb": model.size_mb, "flops": model.flops, "cpu_eff": cpu_eff}
        rows.append({**row, "freq_eff_ghz": freq, "p90_s": p90 * rng.lognormal(0, 0.05)})
    fitted = FittedRegressor("xgboost", REGRESSORS.create("xgboost", seed=seed))
    fitted.fit(rows)
    return fitted


def request_args(mode: str, nodes: int) -> dict:
    """A resnet50 pod with ``nodes`` candidates, as full objects or names."""
    args = json.loads((FIXTURES / "extender_args_nodes.json").read_text())
    if mode.startswith("names") or mode == "floor":
        return {"Pod": args["Pod"], "NodeNames": [f"node{i:05d}" for i in range(nodes)]}
    template = args["Nodes"]["items"]
    items = []
    for i in range(nodes):
        node = copy.deepcopy(template[i % len(template)])
        node["metadata"]["name"] = f"node{i:05d}"
        items.append(node)
    args["Nodes"]["items"] = items
    return args


def loaded_telemetry(nodes: int, seed: int = 0) -> NodeTelemetry:
    """Every node with its own size and load (distinct eq. 8 inputs)."""
    rng = np.random.default_rng(seed)
    telemetry = NodeTelemetry(ttl_s=3600.0)
    telemetry.update(
        NodeCapacity(f"node{i:05d}", float(rng.choice([4, 8, 12, 16])), 2.3, u, u)
        for i, u in enumerate(rng.uniform(0, 0.9, nodes).tolist())
    )
    return telemetry


def summary(values: list[float]) -> dict[str, float]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"n": len(values), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": max(values)}


def regressor_from(repo: Path | None) -> tuple[FittedRegressor, str]:
    """The repository's latest regressor, or the synthetic one; and its label."""
    if repo is None:
        return synthetic_regressor(), "xgboost (synthetic rows)"
    fitted, meta = ModelRepository(repo).load()
    return fitted, f"{meta['regressor']} {meta['version']}"


def bench_extender(fitted: FittedRegressor, mode: str, nodes: int) -> Extender:
    """The extender under test, as deployed (prediction cache on) except in ``names-cold``;
    with every node in the telemetry cache in the ``names`` modes."""
    telemetry = loaded_telemetry(nodes) if mode.startswith("names") else None
    cached_rows = 0 if mode.endswith("-cold") else CACHED_ROWS
    scorer = P90Scorer(fitted, share_within=SHARE_WITHIN, cached_rows=cached_rows)
    return Extender(scorer, default_catalog(), telemetry)


def floor_app(nodes: int, config: ServiceConfig) -> FastAPI:
    """The shared stack answering /prioritize with a ready HostPriorityList of ``nodes`` entries
    after reading the body: no parsing, no scoring."""
    app = create_service_app("floor", config, metrics_prefix="floor")
    reply = orjson.dumps([{"Host": f"node{i:05d}", "Score": NEUTRAL_SCORE} for i in range(nodes)])

    @app.post("/prioritize")
    async def prioritize(request: Request) -> Response:
        await read_body(request, config)
        return json_response(reply)

    return app


def serve(repo: Path | None, mode: str, nodes: int, pipe: Connection) -> None:
    """The child process: serves the extender (or the floor), sends its URL up ``pipe``, stops
    when told."""
    config = ServiceConfig(max_body_bytes=64 * 2**20)
    if mode.startswith("floor"):
        app = floor_app(nodes, config)
    else:
        app = create_extender_app(bench_extender(regressor_from(repo)[0], mode, nodes), config)
    server = ServiceServer(app, config)
    pipe.send(server.start())
    pipe.recv()
    server.stop()


def verb_of(mode: str) -> str:
    return "filter" if mode.endswith("-filter") else "prioritize"


def answered_nodes(verb: str, reply: bytes) -> int:
    """How many nodes a reply accounts for (kept or failed for filter)."""
    data = orjson.loads(reply)
    if verb == "prioritize":
        return len(data)
    failed = len(data["FailedNodes"]) + len(data["FailedAndUnresolvableNodes"])
    return len(data["Nodes"]["items"]) + failed


def round_trips(url: str, verb: str, body: bytes, nodes: int, requests: int) -> list[float]:
    """Wall time (ms) of ``requests`` calls on one kept-alive connection, after
    :data:`WARM_UP_REQUESTS` untimed ones; every reply is checked outside the timing."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    latencies = []
    try:
        for i in range(WARM_UP_REQUESTS + requests):
            start = time.perf_counter()
            connection.request("POST", f"/{verb}", body, headers)
            reply = connection.getresponse()
            data = reply.read()
            elapsed_ms = (time.perf_counter() - start) * 1e3
            assert reply.status == 200 and answered_nodes(verb, data) == nodes, data[:200]
            if i >= WARM_UP_REQUESTS:
                latencies.append(elapsed_ms)
    finally:
        connection.close()
    return latencies


def answer(extender: Extender, verb: str, body: bytes) -> bytes:
    """What the server does for one request, without HTTP: parse, decide, encode."""
    if verb == "filter":
        return msgspec.json.encode(extender.filter(*parse_args_with_items(body))[0])
    return orjson.dumps(extender.prioritize(parse_args_json(body))[0])


def in_process(
    extender: Extender, verb: str, body: bytes, requests: int
) -> tuple[list[float], list[float]]:
    """Wall and CPU time (ms) of the same work without HTTP: parse, score, encode; after the
    server's own warm-up (which freezes the heap for the collector, as the server does)."""
    warm_up(extender)
    for _ in range(WARM_UP_REQUESTS):
        answer(extender, verb, body)
    wall, cpu = [], []
    for _ in range(requests):
        start, start_cpu = time.perf_counter(), time.thread_time()
        answer(extender, verb, body)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.thread_time() - start_cpu) * 1e3)
    return wall, cpu


def measure(
    fitted: FittedRegressor, repo: Path | None, mode: str, nodes: int, requests: int
) -> dict:
    """HTTP round trips against a server in a child process, then the work in-process."""
    body = json.dumps(request_args(mode, nodes)).encode()
    context = multiprocessing.get_context("spawn")  # no fork of a process holding xgboost
    parent, child = context.Pipe()
    process = context.Process(target=serve, args=(repo, mode, nodes, child), daemon=True)
    process.start()
    try:
        if not parent.poll(SERVER_START_S):
            raise RuntimeError(f"the extender did not start within {SERVER_START_S} s")
        latencies = round_trips(parent.recv(), verb_of(mode), body, nodes, requests)
    finally:
        parent.send("stop")
        process.join(60)
    wall, cpu = [0.0], [0.0]  # the floor does no work
    if not mode.startswith("floor"):
        extender = bench_extender(fitted, mode, nodes)
        wall, cpu = in_process(extender, verb_of(mode), body, requests)
    return {
        "mode": mode,
        "nodes": nodes,
        "load_1min": os.getloadavg()[0],  # the machine is shared: how busy it was
        "request_kib": len(body) / 1024,
        **summary(latencies),
        "compute": summary(wall),
        "compute_cpu": summary(cpu),  # CPU time: what the work costs when other jobs share
    }


def exchange(host: str, port: int, data: bytes, trickle_s: float = 0.0) -> tuple[float, bytes]:
    """Sends ``data`` (a byte every ``trickle_s`` if set) and reads until the server closes;
    (seconds until closed, the reply's first bytes)."""
    start = time.perf_counter()
    with socket.create_connection((host, port), timeout=60) as sock:
        try:
            for chunk in [bytes([b]) for b in data] if trickle_s else [data]:
                sock.sendall(chunk)
                time.sleep(trickle_s)
        except OSError:
            pass  # closed on us mid-send: refused
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except OSError:
            pass
    return time.perf_counter() - start, reply[:40]


def abuse(fitted: FittedRegressor) -> dict[str, dict]:
    """How the extender (default limits) answers a 50 MB body, a slowloris client sending a
    header byte every 0.5 s, and a truncated body."""
    config = ServiceConfig()
    server = ServiceServer(
        create_extender_app(Extender(P90Scorer(fitted), default_catalog()), config), config
    )
    host, port = server.start().removeprefix("http://").split(":")
    head = b"POST /prioritize HTTP/1.1\r\nHost: x\r\n"
    cases = {
        "50 MB body": (head + b"Content-Length: 52428800\r\n\r\n" + b"x" * 2**20, 0.0),
        "slowloris headers": (head + b"X-Slow: " + b"a" * 40, 0.5),
        "truncated body": (head + b"Content-Length: 1000\r\n\r\n{", 0.0),
    }
    try:
        results = {}
        for name, (data, trickle_s) in cases.items():
            seconds, reply = exchange(host, int(port), data, trickle_s)
            results[name] = {"closed_after_s": seconds, "reply": reply.decode("latin-1")}
        assert httpx.get(f"http://{host}:{port}/healthz").status_code == 200
    finally:
        server.stop()
    return results


def run_fuzz(examples: int) -> int:
    """Runs the hypothesis fuzz test with ``examples`` per verb; returns pytest's exit code."""
    env = {**os.environ, "HETSCHED_FUZZ_EXAMPLES": str(examples)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", str(FUZZ_TEST)]
    return subprocess.run(command, env=env, cwd=ROOT, check=False).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=None, help="model repository (latest)")
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--modes", default="floor,nodes,names,names-cold")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--fuzz-examples", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    opts = parser.parse_args()
    if opts.fuzz_examples:
        sys.exit(run_fuzz(opts.fuzz_examples))
    fitted, regressor = regressor_from(opts.repo)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; regressor {regressor}; load average "
        + " ".join(f"{v:.2f}" for v in os.getloadavg())
    )
    results = []
    for mode in opts.modes.split(","):
        for nodes in [int(n) for n in opts.sizes.split(",")]:
            r = measure(fitted, opts.repo, mode, nodes, opts.requests)
            results.append(r)
            print(
                f"{mode:10s} {nodes:5d} nodes ({r['request_kib']:7.0f} KiB): p50 {r['p50_ms']:6.2f}"
                f"  p90 {r['p90_ms']:6.2f}  p99 {r['p99_ms']:6.2f}  max {r['max_ms']:6.2f} ms;"
                f" no HTTP p50 {r['compute']['p50_ms']:6.2f}  p99 {r['compute']['p99_ms']:6.2f};"
                f" its CPU time p50 {r['compute_cpu']['p50_ms']:6.2f}"
                f"  p99 {r['compute_cpu']['p99_ms']:6.2f} ms; load {r['load_1min']:.1f}"
            )
    refused = abuse(fitted)
    for name, r in refused.items():
        status = r["reply"].split("\r\n")[0] or "(closed without a reply)"
        print(f"{name}: {status}, connection closed after {r['closed_after_s']:.2f} s")
    if opts.out:
        figures = {"regressor": regressor, "results": results, "refused": refused}
        opts.out.write_text(json.dumps(figures, indent=1))
        print(f"written: {opts.out}")


if __name__ == "__main__":
    main()
