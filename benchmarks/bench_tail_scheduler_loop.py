"""Tail scheduler loop (`hetsched tail schedule`): how long a round takes for P pods on N nodes.

Run: ``.venv/bin/python benchmarks/bench_tail_scheduler_loop.py [--nodes 100,1000] [--pods 200]
[--out F.json]``.

One round against the fake API server (:mod:`hetsched.tail.fake_apiserver`) through the official
``kubernetes`` client, as the command runs it: list nodes and unfinished pods, then per pending
pod filter (fit, cordon, taints, selectors), predict P90 on the feasible nodes, bind (one POST)
and write its Event (one POST). A fifth of the nodes are cordoned or tainted, so the filters do
work; pods request 500m CPU / 1 GiB and every one fits. The same decisions are then timed
in-process without HTTP (filter and choice only), which is the scheduler's own cost; the rest is
the API round trips, which a real API server makes slower. The regressor is a random forest fitted
here on rows whose P90 follows FLOPs / (rate · cores · clock): timing depends on its size, not
its accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from hetsched.core.web import ServiceConfig
from hetsched.tail.catalog import default_catalog
from hetsched.tail.fake_apiserver import FakeApiServer
from hetsched.tail.kube_cluster import KubeCluster, load_api_client
from hetsched.tail.models import resolve_model_features
from hetsched.tail.node_choice import choose_node
from hetsched.tail.node_filter import filter_nodes
from hetsched.tail.node_fit import pod_requests
from hetsched.tail.regressors import REGRESSORS, FittedRegressor
from hetsched.tail.scheduler_loop import SCHEDULER_NAME, LoopSettings, TailScheduler
from hetsched.tail.scoring import P90Scorer

TOKEN = "bench"


def fitted_regressor(seed: int = 0) -> FittedRegressor:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(400):
        flops, cores = float(rng.choice([2e7, 1e9, 8e9])), int(rng.choice([2, 4, 8, 16]))
        u = float(rng.uniform(0, 0.8))
        p90 = flops / (2e11 * max(cores * (1 - u), 0.2)) * rng.lognormal(0, 0.05)
        rows.append(
            {
                "size_mb": flops / 1e8,
                "flops": flops,
                "cpu_eff": cores * (1 - u),
                "freq_eff_ghz": 2.3 * (1 - u),
                "p90_s": p90,
            }
        )
    model = FittedRegressor("random_forest", REGRESSORS.create("random_forest", seed=seed))
    model.fit(rows)
    return model


def make_nodes(n: int) -> list[dict]:
    nodes = []
    for i in range(n):
        cores = (4, 8, 12, 16)[i % 4]
        spec: dict = {}
        if i % 10 == 3:
            spec["unschedulable"] = True
        if i % 10 == 7:
            spec["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
        nodes.append(
            {
                "metadata": {"name": f"node-{i:05d}", "labels": {"zone": f"z{i % 3}"}},
                "spec": spec,
                "status": {"allocatable": {"cpu": str(cores), "memory": "64Gi", "pods": "110"}},
            }
        )
    return nodes


def make_pods(n: int) -> list[dict]:
    return [
        {
            "metadata": {
                "name": f"pod-{i:05d}",
                "namespace": "default",
                "annotations": {"hetsched.io/model": ("resnet50", "retinanet")[i % 2]},
            },
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
                ],
            },
            "status": {"phase": "Pending"},
        }
        for i in range(n)
    ]


def kubeconfig(folder: Path, url: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "bench", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "bench"}}],
        "current-context": "fake",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def in_process_s(nodes: list[dict], pods: list[dict], scorer: P90Scorer) -> tuple[float, float]:
    """Wall and CPU seconds of filtering and choosing for every pod, no HTTP (no bindings, so
    the nodes stay as empty as at the round's start)."""
    features = {m: resolve_model_features(m) for m in ("resnet50", "retinanet")}
    wall, cpu = time.perf_counter(), time.process_time()
    for pod in pods:
        feasible, _ = filter_nodes(pod, pod_requests(pod), nodes, {})
        choose_node(feasible, features[pod["metadata"]["annotations"]["hetsched.io/model"]], scorer)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(n_nodes: int, n_pods: int, scorer: P90Scorer) -> dict:
    nodes, pods = make_nodes(n_nodes), make_pods(n_pods)
    api = FakeApiServer(nodes, pods, ServiceConfig(token=TOKEN))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cluster = KubeCluster(load_api_client(kubeconfig(Path(tmp), api.url)))
        settings = LoopSettings(instance="bench")
        scheduler = TailScheduler(cluster, scorer, default_catalog(), settings)
        wall, cpu = time.perf_counter(), time.process_time()
        decisions = scheduler.schedule_round()
        round_s, round_cpu_s = time.perf_counter() - wall, time.process_time() - cpu
        bound = sum(d.outcome == "Scheduled" for d in decisions)
        cordoned_or_tainted = {
            n["metadata"]["name"]
            for n in nodes
            if n["spec"].get("unschedulable") or n["spec"].get("taints")
        }
        misplaced = sum(b["target"]["name"] in cordoned_or_tainted for b in api.bindings)
    finally:
        api.close()
    filter_s, filter_cpu_s = in_process_s(nodes, pods, scorer)
    return {
        "nodes": n_nodes,
        "pods": n_pods,
        "bound": bound,
        "bound_on_cordoned_or_tainted": misplaced,
        "round_s": round_s,
        "round_cpu_s": round_cpu_s,
        "pods_per_s": n_pods / round_s,
        "ms_per_pod": 1e3 * round_s / n_pods,
        "filter_and_choice_ms_per_pod": 1e3 * filter_s / n_pods,
        "filter_and_choice_cpu_ms_per_pod": 1e3 * filter_cpu_s / n_pods,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,1000")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scorer = P90Scorer(fitted_regressor(), share_within=0.05)
    results = [measure(int(n), args.pods, scorer) for n in args.nodes.split(",")]
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "python": sys.version.split()[0],
        "load_avg": list(os.getloadavg()),
        "results": results,
    }
    for r in results:
        print(
            f"{r['nodes']:>5} nodes, {r['pods']} pods: round {r['round_s']:.2f} s "
            f"({r['pods_per_s']:.0f} pods/s, {r['ms_per_pod']:.1f} ms/pod; filter+choice "
            f"{r['filter_and_choice_ms_per_pod']:.2f} ms/pod); bound {r['bound']}, "
            f"on cordoned/tainted nodes {r['bound_on_cordoned_or_tainted']}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
