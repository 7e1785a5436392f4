"""The fake API server answers like kube-apiserver: field selectors, watch, Binding, Events,
Status errors."""

from __future__ import annotations

import json

import httpx
import pytest

from hetsched.core.errors import HetschedError
from hetsched.tail.fake_apiserver import FakeApiServer, parse_field_selector, selects

from .kube_fixtures import make_node, make_pod


@pytest.fixture
def api():
    bound = make_pod("bound", nodeName="n") | {"status": {"phase": "Running"}}
    done = make_pod("done", nodeName="n") | {"status": {"phase": "Succeeded"}}
    server = FakeApiServer([make_node("n")], [make_pod("pending"), bound, done])
    yield server
    server.close()


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["bound", "done", "pending"]),
        ("spec.nodeName=", ["pending"]),
        ("spec.nodeName!=", ["bound", "done"]),
        ("spec.nodeName==n,status.phase!=Succeeded", ["bound"]),
        ("status.phase!=Succeeded,status.phase!=Failed", ["bound", "pending"]),
        ("metadata.name=done", ["done"]),
    ],
)
def test_field_selectors(api, selector, expected):
    reply = httpx.get(f"{api.url}/api/v1/pods", params={"fieldSelector": selector})
    body = reply.json()
    assert reply.status_code == 200 and body["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in body["items"]) == expected
    assert int(body["metadata"]["resourceVersion"]) == api.resource_version


def test_selector_errors_are_status_400(api):
    with pytest.raises(HetschedError, match="not supported"):
        parse_field_selector("spec.hostname=x")
    with pytest.raises(HetschedError, match="invalid"):
        parse_field_selector("spec.nodeName")
    assert selects({"spec": {}}, parse_field_selector("spec.nodeName="))
    reply = httpx.get(f"{api.url}/api/v1/pods", params={"fieldSelector": "metadata.uid=x"})
    assert reply.status_code == 400
    assert reply.json() | {"message": ""} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "",
        "reason": "BadRequest",
        "code": 400,
    }


def test_watch_streams_changes_after_a_resource_version(api):
    version = api.resource_version
    api.add_pod(make_pod("new"))
    api.bind("default", "pending", {"target": {"name": "n"}})
    params = {"watch": "true", "resourceVersion": str(version), "timeoutSeconds": "0.2"}
    reply = httpx.get(f"{api.url}/api/v1/pods", params=params, timeout=5)
    events = [json.loads(line) for line in reply.text.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "pending"),
        ("ADDED", "new"),
    ]


def test_binding_and_its_errors(api):
    url = f"{api.url}/api/v1/namespaces/default/pods/pending/binding"
    body = {"kind": "Binding", "metadata": {"name": "pending"}, "target": {"name": "n"}}
    assert httpx.post(url, json={"target": {}}).status_code == 400
    assert httpx.post(url, content=b"[1]").status_code == 400
    missing = httpx.post(url.replace("pending", "ghost"), json=body)
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    assert httpx.post(url, json=body).status_code == 201
    conflict = httpx.post(url, json=body)
    assert conflict.status_code == 409 and conflict.json()["reason"] == "Conflict"
    assert "already assigned to node 'n'" in conflict.json()["message"]
    assert api.pods[("default", "pending")]["spec"]["nodeName"] == "n"
    read = httpx.get(f"{api.url}/api/v1/namespaces/default/pods/pending").json()
    assert read["spec"]["nodeName"] == "n"
    assert httpx.get(f"{api.url}/api/v1/namespaces/default/pods/ghost").status_code == 404


def test_events_need_metadata_and_an_involved_object(api):
    url = f"{api.url}/api/v1/namespaces/default/events"
    assert httpx.post(url, json={"metadata": {"name": "e"}}).status_code == 400
    assert httpx.post(url, json={"metadata": {}, "involvedObject": {}}).status_code == 400
    event = {"metadata": {"name": "e"}, "involvedObject": {"name": "pending"}, "reason": "R"}
    reply = httpx.post(url, json=event)
    assert reply.status_code == 201 and reply.json()["metadata"]["namespace"] == "default"
    assert [e["reason"] for e in api.events_for("pending")] == ["R"]
