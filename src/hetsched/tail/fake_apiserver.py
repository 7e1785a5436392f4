"""An in-memory Kubernetes API server, just enough of it for the official client and our scheduler.

No kube-apiserver runs on this machine, so the scheduler loop's tests and the simulated runs talk
to this one instead. It speaks the real REST paths and shapes, so the ``kubernetes`` Python client
works against it unchanged (kubeconfig, bearer token and TLS included, through the shared service
stack :mod:`hetsched.core.web`):

* ``GET /api/v1/nodes`` — a ``NodeList``.
* ``GET /api/v1/pods`` with ``fieldSelector`` (``=``, ``==``, ``!=`` on ``metadata.name``,
  ``metadata.namespace``, ``spec.nodeName``, ``spec.schedulerName``, ``status.phase``) — a
  ``PodList`` whose ``metadata.resourceVersion`` a watch can start from; with ``watch=true``, one
  JSON event per line for every matching pod changed after ``resourceVersion``, then more as they
  change, until ``timeoutSeconds``.
* ``GET /api/v1/namespaces/{ns}/pods/{name}`` — one pod.
* ``POST /api/v1/namespaces/{ns}/pods/{name}/binding`` — binds; 409 ``Conflict`` if the pod is
  already bound, as the real server answers.
* ``POST /api/v1/namespaces/{ns}/events`` — records an Event.

Errors are Kubernetes ``Status`` objects. :attr:`FakeApiServer.binding_faults` injects the
statuses the next binding calls answer with (a 409 that is not "already bound", a 500), to test
retries.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from hetsched.core.errors import HetschedError
from hetsched.core.web import ServiceConfig, create_service_app, json_response, read_body
from hetsched.core.web_server import ServiceServer

SELECTABLE_FIELDS = frozenset(
    {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.schedulerName", "status.phase"}
)
STATUS_REASONS = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 500: "InternalError"}
# How often an open watch looks for changes, and the longest it stays open.
WATCH_POLL_S = 0.02
MAX_WATCH_S = 60.0
Selector = list[tuple[str, bool, str]]


def status_object(code: int, message: str) -> dict[str, Any]:
    """A Kubernetes ``Status`` for a failed call."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": STATUS_REASONS.get(code, "Unknown"),
        "code": code,
    }


def parse_field_selector(text: str) -> Selector:
    """``"spec.nodeName=,status.phase!=Failed"`` as (field, equal, value) requirements.

    Raises:
        HetschedError: A requirement has no operator or names an unsupported field.
    """
    requirements: Selector = []
    for term in filter(None, text.split(",")):
        if "!=" in term:
            field, _, value = term.partition("!=")
            equal = False
        elif "=" in term:
            field, _, value = term.partition("==" if "==" in term else "=")
            equal = True
        else:
            raise HetschedError(f"invalid field selector requirement {term!r}")
        if field not in SELECTABLE_FIELDS:
            raise HetschedError(f'field label not supported: "{field}"')
        requirements.append((field, equal, value))
    return requirements


def field_value(obj: dict[str, Any], field: str) -> str:
    """A dotted field of an object as a string ("" if absent), as field selectors compare it."""
    value: Any = obj
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def selects(obj: dict[str, Any], selector: Selector) -> bool:
    return all((field_value(obj, f) == value) == equal for f, equal, value in selector)


class FakeApiServer:
    """The in-memory cluster and its REST API on a thread (loopback, a free port by default).

    Args:
        nodes: Node objects.
        pods: Pod objects (``metadata.namespace`` defaults to ``default``).
        config: Where to listen, token and TLS (the shared service stack's config).
    """

    def __init__(
        self, nodes: Iterable[dict], pods: Iterable[dict], config: ServiceConfig | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.resource_version = 0
        self.nodes = [self._stamped(copy.deepcopy(node)) for node in nodes]
        self.pods: dict[tuple[str, str], dict] = {}
        self.created_version: dict[tuple[str, str], int] = {}
        self.bindings: list[dict] = []
        self.events: list[dict] = []
        self.binding_faults: deque[int] = deque()
        self.binding_calls = 0
        for pod in pods:
            self.add_pod(pod)
        self.config = config or ServiceConfig()
        self.server = ServiceServer(create_apiserver_app(self, self.config), self.config)
        self.url = self.server.start()

    def close(self) -> None:
        self.server.stop()

    def _stamped(self, obj: dict) -> dict:
        self.resource_version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        return obj

    def add_pod(self, pod: dict) -> None:
        """Creates (a copy of) a pod; a watch sees it as ADDED."""
        pod = copy.deepcopy(pod)
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        pod.setdefault("spec", {})
        key = (meta["namespace"], meta["name"])
        with self.lock:
            self.pods[key] = self._stamped(pod)
            self.created_version[key] = self.resource_version

    def list_pods(self, selector: Selector, since: int = 0) -> tuple[list[dict], int]:
        """Matching pods changed after resource version ``since``, and the current version."""
        with self.lock:
            items = [
                p
                for p in self.pods.values()
                if int(p["metadata"]["resourceVersion"]) > since and selects(p, selector)
            ]
            return copy.deepcopy(items), self.resource_version

    def was_created_after(self, pod: dict, version: int) -> bool:
        """Whether the pod was created after resource version ``version`` (a watch's ADDED)."""
        meta = pod["metadata"]
        with self.lock:
            return self.created_version.get((meta["namespace"], meta["name"]), 0) > version

    def bind(self, namespace: str, name: str, body: dict) -> tuple[int, dict]:
        """Applies a Binding: (status, answer)."""
        node = (body.get("target") or {}).get("name") if isinstance(body, dict) else None
        with self.lock:
            self.binding_calls += 1
            pod = self.pods.get((namespace, name))
            if pod is None:
                return 404, status_object(404, f'pods "{name}" not found')
            # The real server takes the endpoint's kind when the body names none.
            if body.get("kind", "Binding") != "Binding" or not isinstance(node, str) or not node:
                return 400, status_object(400, "the body is not a Binding with a target node")
            if self.binding_faults:
                code = self.binding_faults.popleft()
                return code, status_object(code, f"injected fault for pod {name}")
            bound = pod["spec"].get("nodeName")
            if bound:
                message = f"pod {name} is already assigned to node {bound!r}"
                return 409, status_object(409, f"Operation cannot be fulfilled: {message}")
            pod["spec"]["nodeName"] = node
            self._stamped(pod)
            self.bindings.append(body)
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def record_event(self, namespace: str, body: dict) -> tuple[int, dict]:
        """Stores a core/v1 Event: (status, answer)."""
        meta = body.get("metadata") if isinstance(body, dict) else None
        if not isinstance(meta, dict) or not isinstance(body.get("involvedObject"), dict):
            return 400, status_object(400, "an Event needs metadata and involvedObject")
        if not (meta.get("name") or meta.get("generateName")):
            return 400, status_object(400, "an Event needs metadata.name or generateName")
        with self.lock:
            event = self._stamped({**body, "metadata": {**meta, "namespace": namespace}})
            self.events.append(event)
        return 201, event

    def events_for(self, name: str) -> list[dict]:
        """The Events recorded about the pod ``name``."""
        with self.lock:
            return [e for e in self.events if e["involvedObject"].get("name") == name]


def _watch_lines(
    api: FakeApiServer, selector: Selector, since: int, timeout_s: float
) -> AsyncIterator[bytes]:
    async def lines() -> AsyncIterator[bytes]:
        deadline_s = time.monotonic() + timeout_s
        seen = since
        while True:
            items, version = api.list_pods(selector, seen)
            for pod in items:
                kind = "ADDED" if api.was_created_after(pod, since) else "MODIFIED"
                yield json.dumps({"type": kind, "object": pod}).encode() + b"\n"
            seen = version
            if time.monotonic() >= deadline_s:
                return
            await asyncio.sleep(WATCH_POLL_S)

    return lines()


def create_apiserver_app(api: FakeApiServer, config: ServiceConfig) -> FastAPI:
    """The REST routes of the module docstring on the shared service stack."""
    app = create_service_app("fake kube-apiserver", config, metrics_prefix="hetsched_fake_api")

    def answer(code: int, payload: dict) -> Response:
        return json_response(payload, code)

    async def json_body(request: Request) -> dict | None:
        try:
            body = json.loads(await read_body(request, config))
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    @app.get("/api/v1/nodes")
    def list_nodes() -> Response:
        with api.lock:
            items = copy.deepcopy(api.nodes)
            version = api.resource_version
        meta = {"resourceVersion": str(version)}
        return answer(
            200, {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items}
        )

    @app.get("/api/v1/pods")
    def list_pods(
        fieldSelector: str = "",  # the API's query parameter names
        watch: str = "false",
        resourceVersion: str = "0",
        timeoutSeconds: float = 5.0,
    ) -> Response:
        try:
            selector = parse_field_selector(fieldSelector)
            since = int(resourceVersion or "0")
        except (HetschedError, ValueError) as error:
            return answer(400, status_object(400, str(error)))
        if watch in ("true", "1"):
            timeout_s = min(max(timeoutSeconds, 0.0), MAX_WATCH_S)
            stream = _watch_lines(api, selector, since, timeout_s)
            return StreamingResponse(stream, media_type="application/json")
        items, version = api.list_pods(selector)
        meta = {"resourceVersion": str(version)}
        return answer(
            200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
        )

    @app.get("/api/v1/namespaces/{namespace}/pods/{name}")
    def read_pod(namespace: str, name: str) -> Response:
        with api.lock:
            pod = api.pods.get((namespace, name))
            copied = copy.deepcopy(pod)
        if copied is None:
            return answer(404, status_object(404, f'pods "{name}" not found'))
        return answer(200, copied)

    @app.post("/api/v1/namespaces/{namespace}/pods/{name}/binding")
    async def bind(namespace: str, name: str, request: Request) -> Response:
        body = await json_body(request)
        if body is None:
            return answer(400, status_object(400, "the body is not a JSON object"))
        return answer(*api.bind(namespace, name, body))

    @app.post("/api/v1/namespaces/{namespace}/events")
    async def create_event(namespace: str, request: Request) -> Response:
        body = await json_body(request)
        if body is None:
            return answer(400, status_object(400, "the body is not a JSON object"))
        return answer(*api.record_event(namespace, body))

    return app
