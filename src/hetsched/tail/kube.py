"""Stand-alone scheduler loop against the Kubernetes REST API, and a fake API server for tests.

The loop watches ``/api/v1/pods?watch=true`` filtered to pods with our ``schedulerName`` and no
node, scores the nodes with :class:`P90Scorer` and posts a ``Binding`` to the pod's ``binding``
subresource. It speaks plain HTTP with httpx (the ``kubernetes`` client is not installed here; the
requests are the same ones it sends). The fake server holds pods and nodes in memory and answers
exactly those endpoints; no kube-apiserver can run on this machine.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from hetsched.core.errors import HetschedError
from hetsched.core.http import send_json_body
from hetsched.tail.models import manifest_model_ref, resolve_model_features
from hetsched.tail.scoring import P90Scorer, capacity_from_node_object

SCHEDULER_NAME = "hetsched-tail"


def _matches(pod: dict, selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        key, _, want = term.partition("=")
        value = pod
        for part in key.split("."):
            value = (value or {}).get(part) if isinstance(value, dict) else None
        if (value or "") != want:
            return False
    return True


class FakeApiServer:
    """In-memory pods and nodes behind the few REST endpoints a scheduler uses."""

    def __init__(self, nodes: list[dict], pods: list[dict]) -> None:
        self.nodes = nodes
        self.pods = {
            (p["metadata"].get("namespace", "default"), p["metadata"]["name"]): p for p in pods
        }
        self.bindings: list[dict] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, payload) -> None:
                body = json.dumps(payload).encode()
                send_json_body(self, status, body)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                if url.path == "/api/v1/nodes":
                    self._send(200, {"kind": "NodeList", "items": api.nodes})
                elif url.path == "/api/v1/pods":
                    selector = query.get("fieldSelector", [""])[0]
                    with api.lock:
                        items = [p for p in api.pods.values() if _matches(p, selector)]
                    if query.get("watch", ["false"])[0] in ("true", "1"):
                        # Watch: one ADDED event per matching pod, newline-delimited, then close
                        # (as the real server does at timeoutSeconds).
                        body = "".join(
                            json.dumps({"type": "ADDED", "object": p}) + "\n" for p in items
                        ).encode()
                        send_json_body(self, 200, body)
                    else:
                        self._send(200, {"kind": "PodList", "items": items})
                else:
                    self._send(404, {"kind": "Status", "message": "not found"})

            def do_POST(self) -> None:
                parts = urlparse(self.path).path.strip("/").split("/")
                # /api/v1/namespaces/{ns}/pods/{name}/binding
                if (
                    len(parts) != 7
                    or parts[:3] != ["api", "v1", "namespaces"]
                    or parts[6] != "binding"
                ):
                    self._send(404, {"kind": "Status", "message": "not found"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = (parts[3], parts[5])
                node = (body.get("target") or {}).get("name")
                with api.lock:
                    pod = api.pods.get(key)
                    if pod is None or body.get("kind") != "Binding" or not node:
                        self._send(400, {"kind": "Status", "message": "bad binding"})
                        return
                    if pod["spec"].get("nodeName"):
                        self._send(409, {"kind": "Status", "message": "already bound"})
                        return
                    pod["spec"]["nodeName"] = node
                    api.bindings.append(body)
                self._send(201, {"kind": "Status", "status": "Success"})

            def log_message(self, *args) -> None:
                return

        return Handler


def schedule_pending(
    api_url: str, scorer: P90Scorer, scheduler_name: str = SCHEDULER_NAME, rounds: int = 1
) -> list[tuple[str, str]]:
    """Watches pending pods ``rounds`` times and binds each to its lowest-predicted-P90 node."""
    import httpx

    bound: list[tuple[str, str]] = []
    with httpx.Client(base_url=api_url, timeout=10.0) as client:
        for _ in range(rounds):
            nodes = client.get("/api/v1/nodes").json()["items"]
            if not nodes:
                raise HetschedError(f"API server {api_url} lists no nodes")
            selector = f"spec.schedulerName={scheduler_name},spec.nodeName="
            with client.stream(
                "GET",
                "/api/v1/pods",
                params={"watch": "true", "fieldSelector": selector, "timeoutSeconds": "5"},
            ) as response:
                events = [json.loads(line) for line in response.iter_lines() if line.strip()]
            for event in events:
                if event["type"] != "ADDED":
                    continue
                pod = event["object"]
                ref, shape = manifest_model_ref(pod)
                capacities = [capacity_from_node_object(n, scorer.live) for n in nodes]
                p90 = scorer.predict(resolve_model_features(ref, shape), capacities)
                best = min(p90, key=lambda n: (p90[n], n))
                meta = pod["metadata"]
                ns = meta.get("namespace", "default")
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": meta["name"], "namespace": ns},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": best},
                }
                reply = client.post(
                    f"/api/v1/namespaces/{ns}/pods/{meta['name']}/binding", json=binding
                )
                if reply.status_code == 201:
                    bound.append((meta["name"], best))
    return bound
