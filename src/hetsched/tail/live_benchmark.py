"""The paper's experiment (Sec. V) on this machine: the pods really run, on emulated nodes.

A live node is a set of this machine's cores (as in the harness). By default the nodes are Table I
divided by :data:`LIVE_SCALE`: 4/8/12/16 cores become 1/2/3/4 cores (ids 0-9), memory and pod
requests shrink by the same factor, and a pod gets Table I's 4 intra-op threads / 4 = 1.

Every pod runs in a harness :class:`~hetsched.tail.harness.MeasurementWorker` process, pinned to
its node's cores. The run starts one worker per pod once, and the pods of every scorer and seed
take them in turn: a cold torch import costs seconds per process, the same for every scorer, and
is not what the experiment compares (a kubelet with the image pulled starts a pod as fast for any
scheduler). A worker without a pod idles on its command queue and costs no CPU. From the moment a
pod is placed, a driver thread feeds its worker LoadGen runs of about :data:`LOOP_S` seconds back
to back, so the pod loads its node the way a serving pod does.
Placement is :func:`~hetsched.tail.benchmark.place`, the simulated benchmark's code path: the
default scorer sees requests only; the P90 scorers see eqs. 6-8 measured with
:func:`~hetsched.tail.node_features.local_capacity` on every node's cores *while the pods placed so
far run* (the paper's premise: the next placement observes real utilisation), and predict with the
regressor trained on this machine's harness data. Once all pods of a scorer run, each serves
``queries`` LoadGen single-stream queries at once with the others (each from the end of its
current loading run, i.e. within about :data:`LOOP_S`); P90 per pod is eq. 10 and AVG_NP90 per
node eq. 16. A pod that finishes early keeps looping until the last one is done, so every measured
query ran next to the same neighbours (the simulation's assumption too). Then the scorer's pods
stop, before the next scorer places its own.

The nodes share this machine with whatever else runs on it: its load average is in the report.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.benchmark import (
    DEFAULT_OBJECTIVE,
    PLACEMENT_OBJECTIVES,
    POD_REQUESTS,
    POD_THREADS,
    SCORERS,
    TABLE_I,
    SimNode,
    draw_pods,
    place,
    scorer_result,
    summarize_seeds,
)
from hetsched.tail.harness import (
    FEATURE_WINDOW_S,
    POINT_TIMEOUT_S,
    EmulatedNode,
    MeasurementWorker,
    p90,
)
from hetsched.tail.node_features import NodeCapacity, local_capacity

# One core of this machine stands for this many Table I cores (16 Table I cores -> 4 here).
LIVE_SCALE = 4
LIVE_POD_THREADS = POD_THREADS // LIVE_SCALE
# Seconds of queries per LoadGen run while a pod only loads its node: long enough that a run's
# fixed cost (~15 ms here: LoadGen setup, warm-up, counters) leaves the core busy with inference,
# short enough that a measurement request or a stop waits little. The first run has 2 queries.
LOOP_S = 0.5
FIRST_LOOP_QUERIES = 2
# Allocatable memory per core of nodes given as core sets: Table I's cluster-wide ratio.
MEMORY_PER_CORE = sum(n.memory_bytes for n in TABLE_I) / sum(n.cores for n in TABLE_I)


@dataclass(frozen=True)
class LiveNode:
    """An emulated node: the cores its pods are pinned to, and its allocatable memory."""

    node: EmulatedNode
    memory_bytes: int

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def allocatable(self) -> SimNode:
        """What the scheduler filters and scores on: one allocatable cpu per core, and memory."""
        return SimNode(self.name, len(self.node.cores), self.node.freq_ghz, self.memory_bytes)


def table_i_nodes() -> list[LiveNode]:
    """Table I divided by :data:`LIVE_SCALE` on consecutive cores from 0 (1/2/3/4 cores)."""
    nodes, first = [], 0
    for sim in TABLE_I:
        cores = tuple(range(first, first + sim.cores // LIVE_SCALE))
        first += len(cores)
        emulated = EmulatedNode(sim.name, cores, sim.freq_ghz)
        nodes.append(LiveNode(emulated, sim.memory_bytes // LIVE_SCALE))
    return nodes


def resolve_nodes(given: list[EmulatedNode] | None, available: set[int]) -> list[LiveNode]:
    """The live nodes: ``given`` core sets (memory at :data:`MEMORY_PER_CORE`), or Table I / 4.

    Core ids must exist here and belong to one node only, or two nodes would share CPU that the
    scheduler counts twice.
    """
    if given is None:
        nodes = table_i_nodes()
        needed = sum(len(n.node.cores) for n in nodes)
        if needed > len(available):
            spec = ";".join(",".join(map(str, n.node.cores)) for n in nodes)
            raise DataError(
                f"the default --live-nodes (Table I / {LIVE_SCALE}: {spec!r}) needs {needed} "
                f"cores, this machine has {len(available)}; give --live-nodes, e.g. '0;1'"
            )
    else:
        nodes = [LiveNode(e, round(len(e.cores) * MEMORY_PER_CORE)) for e in given]
    counts = Counter(c for n in nodes for c in n.node.cores)
    if shared := sorted(c for c, k in counts.items() if k > 1):
        raise DataError(f"--live-nodes: cores {shared} are in more than one node (or twice in one)")
    if missing := sorted(set(counts) - available):
        raise DataError(
            f"--live-nodes: cores {missing} do not exist here (available: {sorted(available)})"
        )
    return nodes


def live_requests(models: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Pod (cpu, memory) requests scaled like the nodes; models outside the paper's two request
    what ResNet-50 does."""
    requests = {}
    for model in models:
        cpu, memory = POD_REQUESTS.get(model, POD_REQUESTS["resnet50"])
        requests[model] = (cpu / LIVE_SCALE, memory / LIVE_SCALE)
    return requests


def check_models(models: Sequence[str]) -> None:
    """Live pods build zoo models, so every name must be one (files and URLs are not served)."""
    from hetsched.tail.zoo import MODELS

    if not models:
        raise DataError("--live-models: give at least one zoo model")
    if unknown := [m for m in models if m not in MODELS]:
        raise DataError(f"--live-models: unknown models {unknown}; the zoo has {MODELS.names()}")


def check_room(nodes: Sequence[LiveNode], requests: dict, pods: list[str], seed: int) -> None:
    """Fails before any pod starts if a seed's pods request more cpu or memory than the nodes have
    allocatable in total (NodeResourcesFit would leave a pod pending)."""
    totals = (
        ("cpu", sum(requests[m][0] for m in pods), sum(len(n.node.cores) for n in nodes)),
        ("memory bytes", sum(requests[m][1] for m in pods), sum(n.memory_bytes for n in nodes)),
    )
    for what, want, have in totals:
        if want > have:
            raise DataError(
                f"--live-nodes cannot hold the {len(pods)} pods of seed {seed}: they request "
                f"{want:g} {what}, the nodes have {have:g}; give more or larger --live-nodes, or "
                "lower --pods"
            )


def loop_queries(latencies_s: list[float]) -> int:
    """Queries of the next loading run: about :data:`LOOP_S` at the last run's mean latency."""
    return max(1, round(LOOP_S * len(latencies_s) / sum(latencies_s)))


class Pod:
    """One running inference pod: a harness worker pinned to its node's cores, kept busy.

    A driver thread feeds the worker LoadGen runs of about :data:`LOOP_S` seconds back to back,
    one run of the measured size once :meth:`measure` asks, then loops again until :meth:`stop`;
    the worker then idles until the next pod takes it.
    """

    def __init__(self, model: str, node: LiveNode, threads: int, worker: MeasurementWorker) -> None:
        self.model, self.node, self.threads, self._worker = model, node, threads, worker
        self._ready, self._done, self._stop = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self._queries = 0  # > 0: the size of the measured run asked for
        self._result: dict | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._drive, daemon=True)
        self._thread.start()

    def _drive(self) -> None:
        cores, worker = self.node.node.cores, self._worker
        chunk = FIRST_LOOP_QUERIES
        try:
            while not self._stop.is_set():
                if self._queries and self._result is None:
                    self._result = worker.run(self.model, cores, self.threads, self._queries)
                    self._done.set()
                else:
                    run = worker.run(self.model, cores, self.threads, chunk)
                    chunk = loop_queries(run["latencies_s"])
                    self._ready.set()
        except Exception as error:  # handed to the caller by _wait
            self._error = error
            self._ready.set()
            self._done.set()

    def _wait(self, event: threading.Event, what: str) -> None:
        if not event.wait(POINT_TIMEOUT_S):
            raise HetschedError(
                f"pod {self.model} on {self.node.name}: not {what} after {POINT_TIMEOUT_S:g} s"
            )
        if self._error is not None:
            raise HetschedError(f"pod {self.model} on {self.node.name}: {self._error}")

    def wait_ready(self) -> None:
        """Blocks until the pod has served its first queries, i.e. loads its node."""
        self._wait(self._ready, "serving")

    def measure(self, queries: int) -> None:
        """Asks for one measured run of ``queries`` single-stream queries."""
        self._queries = queries

    def measured(self) -> dict:
        """The measured run's latencies and CPU counters (harness ``MeasurementWorker.run``)."""
        self._wait(self._done, "measured")
        assert self._result is not None
        return self._result

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        """Waits for the driver to end; its worker is then idle."""
        self._thread.join()


class RunningPods:
    """One scorer's pods on the live nodes: started as placed, measured together, stopped on exit
    (context manager). The k-th pod runs in ``workers[k]``. :meth:`observe` is the observer
    :func:`place` asks for eqs. 6-8."""

    def __init__(self, nodes: Sequence[LiveNode], workers: Sequence[MeasurementWorker]) -> None:
        self.nodes, self.workers = nodes, workers
        self.pods: list[Pod] = []
        self.observed: list[list[dict]] = []  # every node's eqs. 6-8 at each placement

    def __enter__(self) -> RunningPods:
        return self

    def start(self, placed: list[tuple[str, int]]) -> None:
        """Starts the pods of ``placed`` not running yet; returns once every pod serves queries."""
        for model, node_idx in placed[len(self.pods) :]:
            worker = self.workers[len(self.pods)]
            self.pods.append(Pod(model, self.nodes[node_idx], LIVE_POD_THREADS, worker))
        for pod in self.pods:
            pod.wait_ready()

    def observe(self, placed: list[tuple[str, int]]) -> list[NodeCapacity]:
        """Eqs. 6-8 of every node, sampled on its cores while the pods placed so far run."""
        self.start(placed)
        caps = [
            local_capacity(n.name, list(n.node.cores), FEATURE_WINDOW_S, n.node.freq_ghz)
            for n in self.nodes
        ]
        self.observed.append([c.as_dict() for c in caps])
        return caps

    def measure(self, queries: int) -> list[dict]:
        """Every pod serves ``queries`` queries at once with the others; their runs, pod order."""
        for pod in self.pods:
            pod.measure(queries)
        return [pod.measured() for pod in self.pods]

    def __exit__(self, *exc) -> None:
        for pod in self.pods:
            pod.stop()
        for pod in self.pods:
            pod.join()


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
    import rich.progress

    from hetsched.tail.models import resolve_model_features

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
