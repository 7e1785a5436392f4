"""Running inference pods of the live benchmark: harness workers kept busy on their node's cores.

A pod is a :class:`~hetsched.tail.measurement_worker.MeasurementWorker` pinned to its node's cores
and fed LoadGen runs of about :data:`LOOP_S` seconds back to back from the moment it is placed, so
it loads its node the way a serving pod does; on request it serves one measured run of a given
size, then loops again until stopped. :class:`RunningPods` is one scorer's set of pods and the
eqs. 6-8 observer the placement asks before each pod.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from hetsched.core.errors import HetschedError
from hetsched.tail.harness import FEATURE_WINDOW_S
from hetsched.tail.live_nodes import LIVE_POD_THREADS, LiveNode
from hetsched.tail.measurement_worker import POINT_TIMEOUT_S, MeasurementWorker
from hetsched.tail.node_features import NodeCapacity, local_capacity

# Seconds of queries per LoadGen run while a pod only loads its node: long enough that a run's
# fixed cost (~15 ms here: LoadGen setup, warm-up, counters) leaves the core busy with inference,
# short enough that a measurement request or a stop waits little. The first run has 2 queries.
LOOP_S = 0.5


FIRST_LOOP_QUERIES = 2


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
    :func:`~hetsched.tail.placement.place` asks for eqs. 6-8."""

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
