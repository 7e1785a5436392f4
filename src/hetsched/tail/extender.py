"""Kubernetes scheduler extender over HTTP: ``POST /filter`` and ``POST /prioritize``.

Speaks the upstream extender JSON (k8s.io/kube-scheduler/extender/v1): ExtenderArgs
``{"Pod", "Nodes", "NodeNames"}`` in; ExtenderFilterResult ``{"Nodes", "NodeNames", "FailedNodes",
"FailedAndUnresolvableNodes", "Error"}`` and HostPriorityList ``[{"Host", "Score"}]`` out.
Filter drops nodes whose predicted P90 exceeds the pod's ``hetsched.io/p90-slo-ms`` annotation;
prioritize maps predicted P90 to 0..10. A malformed request (bad JSON or UTF-8, wrong shape) gets a
400 with a message; if the model cannot be resolved or predicted, prioritize answers neutral equal
scores (the ``ignorable`` contract: scheduling goes on without us).

Bodies are decoded and encoded with orjson: a 100-node request is 78 KiB of JSON, and the stdlib
codec took ~0.8 ms of a 5 ms p99 budget to parse it (orjson ~0.4 ms).
"""

from __future__ import annotations

import gc
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from hetsched.core.errors import HetschedError
from hetsched.core.http import send_json_body
from hetsched.tail.models import MODEL_ANNOTATION, manifest_model_ref, resolve_model_features
from hetsched.tail.scoring import (
    EXTENDER_WEIGHT,
    MAX_EXTENDER_PRIORITY,
    SLO_ANNOTATION,
    P90Scorer,
    capacity_from_node_object,
    scores_from_p90,
)

NEUTRAL_SCORE = MAX_EXTENDER_PRIORITY // 2

SAMPLE_SCHEDULER_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
extenders:
  - urlPrefix: "http://127.0.0.1:8888"
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: {EXTENDER_WEIGHT}
    nodeCacheCapable: false
    enableHTTPS: false
    ignorable: true
    httpTimeout: 5s
"""


class BadRequestError(HetschedError):
    """An extender request that does not follow the ExtenderArgs shape."""


def _nodes_of(args: dict) -> list[dict]:
    if not isinstance(args, dict) or not isinstance(args.get("Pod"), dict):
        raise BadRequestError("ExtenderArgs needs a 'Pod' object")
    nodes = args.get("Nodes")
    if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
        items = nodes["items"]
    elif isinstance(args.get("NodeNames"), list):
        items = [{"metadata": {"name": n}} for n in args["NodeNames"]]
    else:
        raise BadRequestError("ExtenderArgs needs 'Nodes.items' or 'NodeNames'")
    for i, node in enumerate(items):
        meta = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise BadRequestError(f"node {i} has no string 'metadata.name'")
    return items


def _predict(scorer: P90Scorer, args: dict, nodes: list[dict]) -> dict[str, float]:
    ref, shape = manifest_model_ref(args["Pod"])
    model = resolve_model_features(ref, shape)
    return scorer.predict(model, [capacity_from_node_object(n, scorer.live) for n in nodes])


def handle_filter(scorer: P90Scorer, args: dict) -> dict:
    """ExtenderFilterResult: nodes whose predicted P90 meets the pod's SLO (all, if none set)."""
    nodes = _nodes_of(args)
    annotations = args["Pod"].get("metadata", {}).get("annotations") or {}
    slo = annotations.get(SLO_ANNOTATION)
    failed: dict[str, str] = {}
    error = ""
    if slo is not None:
        try:
            p90 = _predict(scorer, args, nodes)
            for name, p in p90.items():
                if p * 1e3 > float(slo):
                    failed[name] = f"predicted P90 {p * 1e3:.1f} ms > SLO {slo} ms"
        except (HetschedError, ValueError) as err:
            error = str(err)
    kept = [n for n in nodes if n["metadata"]["name"] not in failed]
    by_items = isinstance(args.get("Nodes"), dict)
    return {
        "Nodes": {"metadata": {}, "items": kept} if by_items else None,
        "NodeNames": None if by_items else [n["metadata"]["name"] for n in kept],
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": {},
        "Error": error,
    }


def handle_prioritize(scorer: P90Scorer, args: dict) -> list[dict]:
    """HostPriorityList ordered as the nodes came in; neutral scores if prediction fails."""
    nodes = _nodes_of(args)
    names = [n["metadata"]["name"] for n in nodes]
    try:
        scores = scores_from_p90(_predict(scorer, args, nodes))
    except Exception:  # any model failure → neutral, as the ignorable contract expects
        scores = dict.fromkeys(names, NEUTRAL_SCORE)
    return [{"Host": name, "Score": scores[name]} for name in names]


def _warm_up_args(ref: str) -> dict:
    """A one-node prioritize request for model ``ref``, shaped as kube-scheduler sends it."""
    node = {"metadata": {"name": "warm-up"}, "status": {"allocatable": {"cpu": "1"}}}
    pod = {"metadata": {"name": "warm-up", "annotations": {MODEL_ANNOTATION: ref}}}
    return {"Pod": pod, "Nodes": {"items": [node]}}


def warm_up(scorer: P90Scorer) -> None:
    """Answers one prioritize per zoo model, then hides what the process holds from the collector.

    Without it the first request for a model builds it in torch to count its FLOPs (resnet50
    0.5 s, retinanet 0.7 s) and the regressor's first prediction is slow. Afterwards torch, the
    regressor and the features make ~240 k long-lived objects that every full collection would
    walk (165 ms here), and per-request garbage does set off full collections now and then:
    ``gc.freeze`` moves them to the permanent generation, so those collections only see new
    objects. The freeze is process-wide, which is what a server process wants.
    """
    from hetsched.tail.zoo import MODELS

    for ref in MODELS.names():
        handle_prioritize(scorer, _warm_up_args(ref))
    gc.collect()
    gc.freeze()


def make_server(scorer: P90Scorer, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The HTTP server, warmed up (call ``serve_forever``; ``server_address`` gives the port)."""
    warm_up(scorer)
    routes = {"/filter": handle_filter, "/prioritize": handle_prioritize}

    class Handler(BaseHTTPRequestHandler):
        # kube-scheduler keeps its connection to an extender open: answer on it (HTTP/1.1
        # keep-alive) instead of a new connection and thread per call, and send the body
        # without waiting for the headers' ACK (Nagle would hold it back).
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _reply(self, status: int, payload: object) -> None:
            body = orjson.dumps(payload)
            send_json_body(self, status, body)

        def _read_args(self) -> object:
            """The body's JSON; a bad length, bad UTF-8 or bad JSON is the client's error."""
            try:
                length = int(self.headers.get("Content-Length", 0))
                return orjson.loads(self.rfile.read(length) or b"null")
            except ValueError as error:  # orjson.JSONDecodeError is a ValueError
                raise BadRequestError(str(error)) from error

        def do_POST(self) -> None:
            route = routes.get(self.path.rstrip("/"))
            if route is None:
                self._reply(404, {"Error": f"no route {self.path}"})
                return
            try:
                reply = route(scorer, self._read_args())
            except BadRequestError as error:
                self._reply(400, {"Error": f"malformed extender request: {error}"})
                return
            self._reply(200, reply)

        def log_message(self, *args) -> None:
            return

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(scorer: P90Scorer, port: int = 0) -> ThreadingHTTPServer:
    """Starts the extender on 127.0.0.1 in a daemon thread (tests, benchmarks)."""
    server = make_server(scorer, port=port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
