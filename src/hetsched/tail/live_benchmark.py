"""The paper's experiment (Sec. V) on this machine: the pods really run, on emulated nodes.

A live node is a set of this machine's cores (:mod:`hetsched.tail.live_nodes`; by default Table I
divided by 4: 1/2/3/4 cores, requests and memory scaled alike, one intra-op thread per pod).

Every pod (:mod:`hetsched.tail.live_pods`) runs in a
:class:`~hetsched.tail.measurement_worker.MeasurementWorker` process, pinned to its node's cores.
The run starts one worker per pod once, and the pods of every scorer and seed take them in turn: a
cold torch import costs seconds per process, the same for every scorer, and is not what the
experiment compares (a kubelet with the image pulled starts a pod as fast for any scheduler). A
worker without a pod idles on its command queue and costs no CPU. From the moment a pod is placed,
a driver thread feeds its worker LoadGen runs of about :data:`~hetsched.tail.live_pods.LOOP_S`
seconds back to back, so the pod loads its node the way a serving pod does.
Placement is :func:`~hetsched.tail.placement.place`, the simulated benchmark's code path: the
default scorer sees requests only; the P90 scorers see eqs. 6-8 measured with
:func:`~hetsched.tail.node_features.local_capacity` on every node's cores *while the pods placed so
far run* (the paper's premise: the next placement observes real utilisation), and predict with the
regressor trained on this machine's harness data. Once all pods of a scorer run, each serves
``queries`` LoadGen single-stream queries at once with the others (each from the end of its
current loading run, i.e. within about ``LOOP_S``); P90 per pod is eq. 10 and AVG_NP90 per
node eq. 16. A pod that finishes early keeps looping until the last one is done, so every measured
query ran next to the same neighbours (the simulation's assumption too). Then the scorer's pods
stop, before the next scorer places its own.

The nodes share this machine with whatever else runs on it: its load average is in the report.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import rich.progress

from hetsched.core.errors import DataError
from hetsched.tail.benchmark import scorer_result, summarize_seeds
from hetsched.tail.harness import p90
from hetsched.tail.live_nodes import (
    LIVE_POD_THREADS,
    LiveNode,
    check_models,
    check_room,
    live_requests,
)
from hetsched.tail.live_pods import RunningPods
from hetsched.tail.measurement_worker import MeasurementWorker
from hetsched.tail.models import resolve_model_features
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.placement import (
    DEFAULT_OBJECTIVE,
    PLACEMENT_OBJECTIVES,
    SCORERS,
    draw_pods,
    place,
)


@dataclass(frozen=True)
class LiveSetup:
    """What every scorer and seed of a live run share."""

    nodes: list[LiveNode]
    workers: list[MeasurementWorker]  # one per pod, shared by the scorers in turn
    features: dict  # model name -> ModelFeatures (eqs. 1-5)
    requests: dict[str, tuple[float, float]]
    regressor: object  # fitted P90 regressor (eq. 14) from the model repository
    objective: str

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


Progress = Callable[[str, int], None]  # (what runs now, steps done since the last call)


def run_scorer(
    scorer: str,
    pods: list[str],
    seed: int,
    setup: LiveSetup,
    queries: int,
    slo_ms: float | None,
    progress: Progress,
) -> dict:
    """Places ``pods`` by ``scorer`` on running nodes, measures every pod, stops them."""
    label = f"seed {seed} · {scorer}"
    with RunningPods(setup.nodes, setup.workers) as running:

        def observe(placed: list[tuple[str, int]]) -> list[NodeCapacity]:
            progress(f"{label}: placing pod {len(placed) + 1}/{len(pods)}", 0)
            return running.observe(placed)

        placement = place(
            pods,
            setup.features,
            scorer,
            setup.regressor,
            np.random.default_rng(seed + 1),  # the simulated benchmark's tie-break stream
            [n.allocatable for n in setup.nodes],
            observe,
            setup.requests,
            setup.objective,
        )
        progress(f"{label}: starting pods", len(pods))
        running.start(list(zip(pods, placement, strict=True)))
        progress(f"{label}: {queries} queries × {len(pods)} pods", 0)
        runs = running.measure(queries)
        load = os.getloadavg()
    progress(f"{label}: done", 1)
    pod_p90_s = [p90(r["latencies_s"]) for r in runs]  # eq. 10
    result = scorer_result(pod_p90_s, placement, slo_ms, setup.names)  # eq. 16 per node
    result["observed_at_placement"] = running.observed
    # CPU cores' worth each pod received during its measured run: the contention it really had.
    result["pod_cpu_cores"] = [r["own_cpu_s"] / r["wall_s"] for r in runs]
    result["load_avg"] = list(load)
    return result


def run_live_benchmark(
    regressor,
    nodes: list[LiveNode],
    models: list[str],
    seeds: list[int],
    pods_n: int = 10,
    queries: int = 1024,
    slo_ms: float | None = None,
    objective: str = DEFAULT_OBJECTIVE,
) -> dict:
    """Every scorer of :data:`SCORERS` on the same pod sequence per seed, on this machine's
    ``nodes``; the report has the simulated benchmark's shape plus the live nodes, the observed
    eqs. 6-8 at each placement, each pod's CPU and the load average."""
    check_models(models)
    if objective not in PLACEMENT_OBJECTIVES:  # before any pod runs, not at the third scorer
        raise DataError(f"--objective must be one of {PLACEMENT_OBJECTIVES}, got {objective!r}")
    requests = live_requests(models)
    pods_by_seed = {s: draw_pods(np.random.default_rng(s), models, pods_n) for s in seeds}
    for seed, pods in pods_by_seed.items():
        check_room(nodes, requests, pods, seed)
    features = {m: resolve_model_features(m) for m in models}
    load_before = list(os.getloadavg())
    per_seed = []
    with contextlib.ExitStack() as stack, rich.progress.Progress() as bar:
        workers = [stack.enter_context(MeasurementWorker()) for _ in range(pods_n)]
        setup = LiveSetup(nodes, workers, features, requests, regressor, objective)
        task = bar.add_task("live benchmark", total=len(seeds) * len(SCORERS) * (pods_n + 1))

        def progress(text: str, advance: int) -> None:
            bar.update(task, description=text, advance=advance)

        for seed, pods in pods_by_seed.items():
            result: dict = {"seed": seed, "pods": pods}
            for scorer in SCORERS:
                result[scorer] = run_scorer(scorer, pods, seed, setup, queries, slo_ms, progress)
            per_seed.append(result)
    return {
        "nodes": setup.names,
        "live_nodes": [
            {"name": n.name, "cores": list(n.node.cores), "memory_bytes": n.memory_bytes}
            for n in nodes
        ],
        "models": list(models),
        "requests": {m: list(r) for m, r in requests.items()},
        "pod_threads": LIVE_POD_THREADS,
        "objective": objective,
        "seeds": per_seed,
        "summary": summarize_seeds(per_seed, slo_ms),
        "queries": queries,
        "slo_ms": slo_ms,
        "load_avg_before": load_before,
        "load_avg_after": list(os.getloadavg()),
    }
