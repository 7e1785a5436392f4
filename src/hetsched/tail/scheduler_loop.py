"""The stand-alone scheduler (own-scheduler mode): bind our pending pods by predicted P90.

Pods opt in with ``spec.schedulerName: hetsched-tail``. Each round (Sec. IV of the paper, with the
cluster's rules kube-scheduler would apply) the loop:

1. lists the nodes and the pods that are not finished (one snapshot: the bound ones are the
   nodes' load, the unbound ones with our scheduler name are the queue, highest ``priority`` then
   oldest first);
2. filters the nodes for each due pod (:func:`hetsched.tail.node_filter.filter_nodes`: cordon,
   taints, nodeSelector and required affinity, resource fit against allocatable minus what is
   already bound, this round's bindings included);
3. picks the node (:func:`hetsched.tail.node_choice.choose_node`: lowest predicted P90 from the
   catalogue's model features and the node's eq. 8 capacity, live if telemetry is fresh);
4. binds through the ``binding`` subresource. A 409 is re-checked: a pod someone else bound is
   left alone; otherwise the bind, like a 429/5xx or a dropped connection, is retried with
   exponential backoff and seeded jitter (:class:`hetsched.tail.backoff.Backoff`);
5. writes an Event per decision (:mod:`hetsched.tail.scheduling_events`): ``Scheduled``, or
   ``FailedScheduling`` with kube-scheduler's "0/N nodes are available: ..." message. A pod that
   fits nowhere (or whose bind kept failing) is retried in a later round after its own backoff.

Between rounds it waits for the next pod (a watch of our pending pods, or a poll) or the next
retry, whichever comes first.
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import urllib3
from kubernetes.client import ApiException

from hetsched.core.errors import HetschedError
from hetsched.tail.backoff import Backoff
from hetsched.tail.catalog import ModelCatalog
from hetsched.tail.flops import ModelFeatures
from hetsched.tail.kube_cluster import ACTIVE_PODS_SELECTOR, KubeCluster, pending_selector
from hetsched.tail.models import UnknownModelError, features_for_annotations
from hetsched.tail.node_choice import Placement, choose_node
from hetsched.tail.node_filter import filter_nodes, unschedulable_message
from hetsched.tail.node_fit import (
    PODS_RESOURCE,
    Resources,
    add_resources,
    bound_node,
    pod_requests,
    requested_by_node,
)
from hetsched.tail.scheduling_events import FAILED_SCHEDULING, SCHEDULED, EventType, pod_event
from hetsched.tail.scoring import P90Scorer
from hetsched.tail.telemetry import NodeTelemetry

LOG = logging.getLogger(__name__)
SCHEDULER_NAME = "hetsched-tail"
# Statuses worth retrying a bind on: conflicts, throttling, server trouble (0: no answer).
RETRYABLE_STATUSES = frozenset({0, 409, 429, 500, 502, 503, 504})
Outcome = Literal["Scheduled", "FailedScheduling", "BoundElsewhere", "Gone"]
PodKey = tuple[str, str]


@dataclass(frozen=True)
class LoopSettings:
    """How the loop retries and waits.

    Args:
        scheduler_name: The ``spec.schedulerName`` we serve (also the Events' reporter).
        bind_attempts: Binds tried per decision before it counts as failed.
        bind_backoff_s: (initial, max) wait between bind attempts.
        retry_backoff_s: (initial, max) wait before an unschedulable pod is tried again.
        poll_interval_s: Longest wait between rounds (the watch's timeout when watching).
        seed: Seed of the backoff jitter.
        instance: ``reportingInstance`` of the Events (default: this host's name).
    """

    scheduler_name: str = SCHEDULER_NAME
    bind_attempts: int = 5
    bind_backoff_s: tuple[float, float] = (0.1, 5.0)
    retry_backoff_s: tuple[float, float] = (1.0, 60.0)
    poll_interval_s: float = 5.0
    seed: int = 0
    instance: str = field(default_factory=socket.gethostname)

    def __post_init__(self) -> None:
        if self.bind_attempts < 1:
            raise HetschedError(f"bind attempts must be at least 1, got {self.bind_attempts}")
        if self.poll_interval_s <= 0:
            raise HetschedError(f"the poll interval must be positive, got {self.poll_interval_s}")


@dataclass(frozen=True)
class Decision:
    """What the loop did with one pod: the outcome, the node (if bound), the message of its Event
    (if any) and the bind attempts it took."""

    namespace: str
    pod: str
    outcome: Outcome
    node: str | None
    message: str
    attempts: int = 0


def pod_key(pod: Mapping[str, Any]) -> PodKey:
    meta = pod["metadata"]
    return meta.get("namespace", "default"), meta["name"]


def queue_order(pod: Mapping[str, Any]) -> tuple[int, str, PodKey]:
    """kube-scheduler's default queue order: higher ``spec.priority`` first, then older."""
    priority = (pod.get("spec") or {}).get("priority")
    created = (pod.get("metadata") or {}).get("creationTimestamp") or ""
    return -(priority if isinstance(priority, int) else 0), created, pod_key(pod)


class TailScheduler:
    """The loop of the module docstring over one cluster.

    Args:
        cluster: The API calls (:class:`hetsched.tail.kube_cluster.KubeCluster`).
        scorer: The P90 regressor and its score scale.
        catalog: Model features by catalogue key (``hetsched.io/model``).
        settings: Retries and waits.
        telemetry: Live node capacities; readings older than its TTL are not used.
        clock, sleep, now: Time sources (tests replace them).
    """

    def __init__(
        self,
        cluster: KubeCluster,
        scorer: P90Scorer,
        catalog: ModelCatalog,
        settings: LoopSettings | None = None,
        telemetry: NodeTelemetry | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.cluster, self.scorer, self.catalog = cluster, scorer, catalog
        self.settings = settings or LoopSettings()
        self.telemetry = telemetry
        self.clock, self.sleep, self.now = clock, sleep, now
        self.bind_backoff = Backoff(*self.settings.bind_backoff_s, seed=self.settings.seed)
        self.retry_backoff = Backoff(*self.settings.retry_backoff_s, seed=self.settings.seed + 1)
        # Pods waiting for a retry: (failures so far, monotonic time when due).
        self.retry_due: dict[PodKey, tuple[int, float]] = {}
        self.event_failures = 0
        self._resource_version = ""

    def run(self, rounds: int = 0, watch: bool = True) -> Iterator[Decision]:
        """Scheduling rounds (``rounds`` of them; 0: until interrupted), yielding each decision."""
        done = 0
        while True:
            yield from self.schedule_round()
            done += 1
            if rounds and done >= rounds:
                return
            self.wait_for_work(watch)

    def wait_for_work(self, watch: bool) -> None:
        """Until a pending pod appears (watching) or the poll interval or next retry is up."""
        wait_s = self.settings.poll_interval_s
        if self.retry_due:
            next_due_s = min(due for _, due in self.retry_due.values())
            wait_s = max(0.0, min(wait_s, next_due_s - self.clock()))
        if not watch or wait_s < 1.0:
            self.sleep(wait_s)
            return
        selector = pending_selector(self.settings.scheduler_name)
        try:
            with self.cluster.pod_changes(selector, self._resource_version, wait_s) as events:
                for event in events:
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        return
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            LOG.warning("watching pending pods failed (%s); polling instead", error)
            self.sleep(wait_s)

    def _live_capacities(self) -> None:
        if self.telemetry is None:
            return
        view = self.telemetry.view()
        self.scorer.live = {
            name: reading.capacity
            for name, reading in view.readings.items()
            if reading.observed_s >= view.stale_before_s
        }

    def schedule_round(self) -> list[Decision]:
        """One pass over the due pending pods (step 1-5 of the module docstring).

        Raises:
            HetschedError: The nodes or pods could not be listed.
        """
        try:
            nodes = self.cluster.list_nodes()
            active, self._resource_version = self.cluster.list_pods(ACTIVE_PODS_SELECTOR)
        except ApiException as error:
            message = f"listing nodes and pods failed: {error.status} {error.reason}"
            raise HetschedError(message) from None
        except urllib3.exceptions.HTTPError as error:
            raise HetschedError(f"the API server did not answer: {error}") from None
        self._live_capacities()
        used = requested_by_node(active)
        name = self.settings.scheduler_name
        queue = [
            p
            for p in active
            if bound_node(p) is None and (p.get("spec") or {}).get("schedulerName") == name
        ]
        queued = {pod_key(p) for p in queue}
        self.retry_due = {k: v for k, v in self.retry_due.items() if k in queued}
        now_s = self.clock()
        decisions = []
        for pod in sorted(queue, key=queue_order):
            due = self.retry_due.get(pod_key(pod))
            if due is None or due[1] <= now_s:
                decisions.append(self.schedule_pod(pod, nodes, used))
        return decisions

    def schedule_pod(
        self, pod: Mapping[str, Any], nodes: list[dict], used: dict[str, Resources]
    ) -> Decision:
        """Filters, picks, binds and reports one pod; ``used`` gains its requests if bound."""
        namespace, name = pod_key(pod)
        try:
            request = pod_requests(pod)
        except HetschedError as error:
            return self._failed(pod, f"the pod's resource requests are invalid: {error}")
        feasible, reasons = filter_nodes(pod, request, nodes, used)
        if not feasible:
            return self._failed(pod, unschedulable_message(len(nodes), reasons))
        model, fallback = self._model(pod)
        placement = choose_node(feasible, model, self.scorer)
        outcome, attempts, detail = self._bind(pod, placement.node)
        if outcome == "Scheduled":
            self.retry_due.pop((namespace, name), None)
            taken = add_resources(request, {PODS_RESOURCE: 1.0})
            used[placement.node] = add_resources(used.get(placement.node, {}), taken)
            message = self._scheduled_message(namespace, name, placement, fallback)
            self._event(pod, SCHEDULED, message, "Normal")
            return Decision(namespace, name, outcome, placement.node, message, attempts)
        if outcome == "FailedScheduling":
            message = f"binding to node {placement.node} failed after {attempts} attempts: {detail}"
            return self._failed(pod, message, attempts)
        self.retry_due.pop((namespace, name), None)
        return Decision(namespace, name, outcome, None, detail, attempts)

    def _model(self, pod: Mapping[str, Any]) -> tuple[ModelFeatures | None, str]:
        """The pod's catalogue features, or None and why (the placement then ignores P90)."""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        try:
            return features_for_annotations(annotations, self.catalog), ""
        except UnknownModelError as error:
            return None, f"{error} ({error.reason})"

    @staticmethod
    def _scheduled_message(namespace: str, name: str, placement: Placement, fallback: str) -> str:
        why = (
            f"predicted P90 {1e3 * placement.p90_s:.1f} ms, score {placement.score}"
            if placement.p90_s is not None
            else f"no P90 prediction: {fallback or 'no node capacity'}; least requested CPU"
        )
        return f"Successfully assigned {namespace}/{name} to {placement.node} ({why})"

    def _bind(self, pod: Mapping[str, Any], node: str) -> tuple[Outcome, int, str]:
        """Binds with retries: (outcome, attempts made, detail of the last failure)."""
        namespace, name = pod_key(pod)
        uid = (pod.get("metadata") or {}).get("uid")
        detail = ""
        for attempt in range(self.settings.bind_attempts):
            try:
                self.cluster.bind(namespace, name, node, uid)
                return "Scheduled", attempt + 1, ""
            except ApiException as error:
                detail = f"{error.status} {error.reason}"
                if error.status == 404:
                    return "Gone", attempt + 1, "the pod was deleted before it was bound"
                if error.status == 409:
                    current = self._current(namespace, name)
                    if current is None:
                        return "Gone", attempt + 1, "the pod was deleted before it was bound"
                    if bound_node(current) is not None:
                        bound = bound_node(current)
                        return "BoundElsewhere", attempt + 1, f"already bound to {bound}"
                elif error.status not in RETRYABLE_STATUSES:
                    return "FailedScheduling", attempt + 1, detail
            except urllib3.exceptions.HTTPError as error:
                detail = f"no answer: {error}"
            if attempt + 1 < self.settings.bind_attempts:
                self.sleep(self.bind_backoff.delay_s(attempt))
        return "FailedScheduling", self.settings.bind_attempts, detail

    def _current(self, namespace: str, name: str) -> dict | None:
        """The pod as the server has it now (after a conflict); unknown counts as unbound."""
        try:
            return self.cluster.read_pod(namespace, name)
        except (ApiException, urllib3.exceptions.HTTPError):
            return {"metadata": {"name": name, "namespace": namespace}}

    def _failed(self, pod: Mapping[str, Any], message: str, attempts: int = 0) -> Decision:
        """A FailedScheduling Event, and a retry after the pod's next backoff."""
        key = pod_key(pod)
        failures = self.retry_due.get(key, (0, 0.0))[0]
        self.retry_due[key] = (failures + 1, self.clock() + self.retry_backoff.delay_s(failures))
        self._event(pod, FAILED_SCHEDULING, message, "Warning")
        return Decision(*key, "FailedScheduling", None, message, attempts)

    def _event(self, pod: Mapping[str, Any], reason: str, message: str, kind: EventType) -> None:
        """Writes the Event; a failure to write it is logged and counted, never fatal."""
        settings = self.settings
        event = pod_event(
            pod, reason, message, kind, settings.scheduler_name, settings.instance, self.now()
        )
        try:
            self.cluster.create_event(pod_key(pod)[0], event)
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            self.event_failures += 1
            LOG.warning("could not write a %s Event for %s: %s", reason, pod_key(pod), error)
