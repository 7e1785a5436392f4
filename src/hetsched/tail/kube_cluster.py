"""The scheduler loop's view of a cluster, through the official ``kubernetes`` Python client.

Authentication and transport are the client's: a kubeconfig (``--kubeconfig``, else the default
loading rules: ``$KUBECONFIG``, then ``~/.kube/config``) with whatever it configures (bearer token,
client certificates, exec plugins, the cluster's CA for TLS), or the pod's service account
in-cluster (``load_incluster_config``). Objects are read as the API's raw JSON (dicts), which the
pure filters of :mod:`hetsched.tail.node_filter` take, rather than deserialised into the client's
model classes (slow for thousands of pods, and the Binding model rejects the server's answer).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client, config, watch
from kubernetes.config.config_exception import ConfigException

from hetsched.core.errors import HetschedError

# Seconds one API call may take (connect, read); the client has no timeout of its own.
REQUEST_TIMEOUT_S = 10.0
ACTIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def pending_selector(scheduler_name: str) -> str:
    """Field selector of the pods waiting for ``scheduler_name``: ours, unbound, not finished."""
    return f"spec.schedulerName={scheduler_name},spec.nodeName=,{ACTIVE_PODS_SELECTOR}"


def load_api_client(
    kubeconfig: Path | None = None, context: str | None = None, in_cluster: bool = False
) -> client.ApiClient:
    """An API client from a kubeconfig (the default loading rules if None) or in-cluster.

    Raises:
        HetschedError: No usable configuration (the client's reason, on one line).
    """
    if in_cluster and (kubeconfig is not None or context is not None):
        raise HetschedError("--in-cluster takes neither --kubeconfig nor --context")
    if kubeconfig is not None and not kubeconfig.is_file():
        raise HetschedError(f"kubeconfig {kubeconfig} not found")
    try:
        if in_cluster:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        path = str(kubeconfig) if kubeconfig is not None else None
        return config.new_client_from_config(
            config_file=path, context=context, persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as error:
        where = "in-cluster" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise HetschedError(
            f"cannot configure the Kubernetes client ({where}): {first_line}"
        ) from None


def _json(response: Any) -> Any:
    return json.loads(response.data)


class KubeCluster:
    """The calls the scheduler loop makes, each with a timeout, answering the API's JSON."""

    def __init__(self, api_client: client.ApiClient, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.core = client.CoreV1Api(api_client)
        self.timeout_s = timeout_s

    def list_nodes(self) -> list[dict]:
        """Every Node object."""
        reply = self.core.list_node(_preload_content=False, _request_timeout=self.timeout_s)
        return list(_json(reply)["items"])

    def list_pods(self, field_selector: str) -> tuple[list[dict], str]:
        """Pods of every namespace matching ``field_selector``, and the list's resourceVersion."""
        reply = self.core.list_pod_for_all_namespaces(
            field_selector=field_selector,
            _preload_content=False,
            _request_timeout=self.timeout_s,
        )
        body = _json(reply)
        return list(body["items"]), str((body.get("metadata") or {}).get("resourceVersion", ""))

    def read_pod(self, namespace: str, name: str) -> dict | None:
        """The pod now, or None if it is gone."""
        try:
            reply = self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=self.timeout_s
            )
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(_json(reply))

    def bind(self, namespace: str, name: str, node: str, uid: str | None) -> None:
        """Posts a Binding of the pod to ``node`` (its ``binding`` subresource).

        Raises:
            kubernetes.client.ApiException: The server refused (409: already bound or changed).
        """
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        self.core.create_namespaced_pod_binding(
            name, namespace, body, _preload_content=False, _request_timeout=self.timeout_s
        )

    def create_event(self, namespace: str, event: dict) -> None:
        """Posts a core/v1 Event (built by :func:`hetsched.tail.scheduling_events.pod_event`)."""
        # from_dict answers None only for a None input.
        body = cast(client.CoreV1Event, client.CoreV1Event.from_dict(event))
        self.core.create_namespaced_event(
            namespace, body, _preload_content=False, _request_timeout=self.timeout_s
        )

    @contextmanager
    def pod_changes(
        self, field_selector: str, resource_version: str, timeout_s: float
    ) -> Iterator[Iterator[dict]]:
        """A watch of matching pods after ``resource_version``, ended by the server after
        ``timeout_s``: yields the raw events (``type``, ``object``); closed on exit."""
        watcher = watch.Watch()
        events = watcher.stream(
            self.core.list_pod_for_all_namespaces,
            field_selector=field_selector,
            resource_version=resource_version,
            timeout_seconds=max(1, round(timeout_s)),
            deserialize=False,
            _request_timeout=timeout_s + self.timeout_s,
        )
        try:
            yield events
        finally:
            watcher.stop()
            events.close()
