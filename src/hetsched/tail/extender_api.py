"""The Kubernetes scheduler extender v1 wire types (k8s.io/kube-scheduler/extender/v1).

Requests are msgspec structs that declare only the fields the extender reads; everything else a
Pod or Node carries is skipped by the decoder without building Python objects for it. That is
what makes full Node objects (``nodeCacheCapable: false``, ~0.8 KiB of JSON per node) affordable:
a 5,000-node request is 3.8 MiB, and a full parse of it into dicts or pydantic models took most
of a request's time. Of a Node that means its name, its clock label and the ``cpu`` of its
allocatable and capacity: its other labels and resources are skipped like its conditions (as
string maps they cost 9 of 11 ms of decoding at 5,000 nodes). Declared fields are strict: a node
name must be a non-empty string, the clock label and the pod's annotations strings, quantities
strings or numbers (not booleans); a request that breaks that gets a 400 naming the field
(:func:`decode_args`).

The request structs are not tracked by the garbage collector (``gc=False``): they hold only
strings, numbers, string maps and each other, so they cannot form a cycle, and a 5,000-node
request would otherwise add ~15,000 objects for every young collection to walk.

Replies are built as plain dicts with the reply models' field names (see
:mod:`hetsched.tail.extender`); the pydantic reply models document them in the OpenAPI schema.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from pydantic import BaseModel, Field

from hetsched.tail.scoring import FREQ_LABEL

QuantityValue = str | int | float


class ObjectMeta(msgspec.Struct, frozen=True, gc=False):
    """metadata of a Pod: the extender reads its annotations (name and labels for completeness)."""

    name: str = ""
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class NodeLabels(msgspec.Struct, frozen=True, gc=False):
    """A Node's labels as the extender reads them: the clock label (eq. 8's FREQ); the others
    are skipped unread."""

    cpu_freq_ghz: str | None = msgspec.field(default=None, name=FREQ_LABEL)

    def as_map(self) -> dict[str, str] | None:
        """The labels read, as the label map they came from (None if none was read)."""
        return None if self.cpu_freq_ghz is None else {FREQ_LABEL: self.cpu_freq_ghz}


class NodeMeta(msgspec.Struct, frozen=True, gc=False):
    """metadata of a Node: its name (required) and the labels read."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    labels: NodeLabels | None = None


class Pod(msgspec.Struct, frozen=True, gc=False):
    """v1.Pod: the extender reads its annotations (model, optional shape and SLO)."""

    metadata: ObjectMeta = ObjectMeta()


class NodeResources(msgspec.Struct, frozen=True, gc=False):
    """A Node's allocatable or capacity resource list: the extender reads ``cpu``; memory, pods,
    devices and the rest are skipped unread."""

    cpu: QuantityValue | None = None


class NodeStatus(msgspec.Struct, frozen=True, gc=False):
    """v1.NodeStatus: allocatable (or capacity) CPU."""

    allocatable: NodeResources | None = None
    capacity: NodeResources | None = None

    def cpu(self) -> QuantityValue | None:
        """Allocatable CPU, else capacity CPU (where allocatable has none), else None."""
        for resources in (self.allocatable, self.capacity):
            if resources is not None and resources.cpu is not None:
                return resources.cpu
        return None


class Node(msgspec.Struct, frozen=True, gc=False):
    """v1.Node: name, clock label and status."""

    metadata: NodeMeta
    status: NodeStatus | None = None


class NodeList(msgspec.Struct, frozen=True, gc=False):
    """v1.NodeList."""

    items: list[Node]


class ExtenderArgs(msgspec.Struct, frozen=True, gc=False):
    """What kube-scheduler sends to filter and prioritize: the pod, and either full Node objects
    (``nodeCacheCapable: false``) or node names (``nodeCacheCapable: true``)."""

    Pod: Pod
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None

    def __post_init__(self) -> None:
        if self.Nodes is None and self.NodeNames is None:
            raise ValueError("ExtenderArgs needs 'Nodes' (a NodeList) or 'NodeNames'")

    def node_names(self) -> list[str]:
        """The candidate nodes' names, in request order."""
        if self.Nodes is not None:
            return [n.metadata.name for n in self.Nodes.items]
        return list(self.NodeNames or [])

    def annotations(self) -> dict[str, str]:
        return self.Pod.metadata.annotations or {}


class _RawNodeList(msgspec.Struct, frozen=True, gc=False):
    items: list[msgspec.Raw]


class _RawNodes(msgspec.Struct, frozen=True, gc=False):
    """The request's Node objects as their JSON text, for filter to return the kept ones."""

    Nodes: _RawNodeList | None = None


class MalformedArgsError(ValueError):
    """A body that is not JSON or not ExtenderArgs; the message names the problem."""


_ARGS = msgspec.json.Decoder(ExtenderArgs)
_RAW_NODES = msgspec.json.Decoder(_RawNodes)


def decode_args(body: bytes) -> ExtenderArgs:
    """ExtenderArgs from a request body, parsed and validated in one pass.

    The decoder checks the JSON grammar everywhere but UTF-8 only in the strings it keeps, so a
    body that is not all ASCII is checked as UTF-8 first (JSON is UTF-8; filter returns Node
    objects as sent, and must not pass invalid text on).

    Raises:
        MalformedArgsError: Not UTF-8, not JSON, nested too deeply, or a declared field of the
            wrong type or missing; the message says where (``$.Nodes.items[3].metadata.name``).
    """
    try:
        if not body.isascii():
            body.decode("utf-8")
        return _ARGS.decode(body)
    except UnicodeDecodeError as error:
        raise MalformedArgsError(f"not UTF-8: {error.reason} at byte {error.start}") from None
    except msgspec.DecodeError as error:  # ValidationError is a DecodeError
        raise MalformedArgsError(str(error)) from None
    except RecursionError:
        raise MalformedArgsError("JSON nested too deeply") from None


def decode_args_with_items(body: bytes) -> tuple[ExtenderArgs, list[msgspec.Raw] | None]:
    """ExtenderArgs and, with Node objects, each object's JSON exactly as sent (filter returns
    the kept ones byte for byte, so kube-scheduler's later plugins see what it sent)."""
    args = decode_args(body)
    if args.Nodes is None:
        return args, None
    nodes = _RAW_NODES.decode(body).Nodes  # cannot fail: the same body just decoded
    return args, nodes.items if nodes is not None else None


def request_schema() -> dict:
    """The JSON schema of ExtenderArgs, for the OpenAPI document."""
    return msgspec.json.schema(ExtenderArgs)


class ExtenderFilterResult(BaseModel):
    """The answer to filter: nodes kept, nodes failed (with a reason) and an error."""

    Nodes: dict | None = Field(None, description="The kept NodeList (Nodes mode).")
    NodeNames: list[str] | None = Field(None, description="The kept names (nodeCacheCapable).")
    FailedNodes: dict[str, str] = Field(description="Failed now; preemption may help.")
    FailedAndUnresolvableNodes: dict[str, str] = Field(
        description="Can never meet the SLO, even idle; preemption would not help."
    )
    Error: str = ""


class HostPriority(BaseModel):
    """One node's score in 0..MaxExtenderPriority (10)."""

    Host: str
    Score: int
