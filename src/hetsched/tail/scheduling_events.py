"""The Events the scheduler loop writes about its decisions, as kube-scheduler writes them.

Every decision leaves an Event on the pod, so ``kubectl describe pod`` and ``kubectl get events``
show what happened: ``Scheduled`` (Normal, "Successfully assigned ns/pod to node ...") or
``FailedScheduling`` (Warning, "0/3 nodes are available: ..."). They are core/v1 Events (the
``events`` resource the scheduler's ClusterRole may create): ``involvedObject`` is the pod,
``source.component`` and ``reportingComponent`` (core/v1's name for events.k8s.io's
``reportingController``) are our scheduler name, ``reportingInstance`` this process.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Literal

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
# The API server refuses Event messages past 1 KiB.
MAX_MESSAGE_CHARS = 1024
EventType = Literal["Normal", "Warning"]


def rfc3339(moment: datetime.datetime) -> str:
    """A UTC timestamp as the API writes them (seconds, ``Z``)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_event(
    pod: Mapping[str, Any],
    reason: str,
    message: str,
    event_type: EventType,
    scheduler_name: str,
    instance: str,
    now: datetime.datetime,
) -> dict[str, Any]:
    """A core/v1 Event about ``pod`` (named ``<pod>.<nanoseconds in hex>``, as client-go names
    them, so repeated decisions on one pod are separate Events)."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace", "default")
    stamp = rfc3339(now)
    nanoseconds = int(now.timestamp() * 1e9)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{nanoseconds:x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:MAX_MESSAGE_CHARS],
        "type": event_type,
        "action": "Binding" if reason == SCHEDULED else "Scheduling",
        "source": {"component": scheduler_name},
        "reportingComponent": scheduler_name,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
