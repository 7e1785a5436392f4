"""The Kubernetes scheduler extender v1 wire types (k8s.io/kube-scheduler/extender/v1), in pydantic.

Only the fields the extender reads are declared; everything else a Pod or Node carries is
accepted and ignored (``extra="ignore"``), so real objects validate unchanged. Declared fields are
strict: a node name must be a string, annotations and labels string maps; a request that breaks
that gets a 400 naming the field. Replies are built as plain dicts with these field names (see
:mod:`hetsched.tail.extender`); the reply models document them in the OpenAPI schema.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

READ = ConfigDict(strict=True, extra="ignore", frozen=True)
QuantityValue = str | int | float


class ObjectMeta(BaseModel):
    """metadata of a Pod or Node: the extender reads name, labels and annotations."""

    model_config = READ

    name: str = ""
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class NamedMeta(ObjectMeta):
    """metadata of a Node, whose name is required."""

    name: str = Field(min_length=1)


class Pod(BaseModel):
    """v1.Pod: the extender reads its annotations (model, optional shape and SLO)."""

    model_config = READ

    metadata: ObjectMeta = ObjectMeta()


class NodeStatus(BaseModel):
    """v1.NodeStatus: allocatable (or capacity) CPU."""

    model_config = READ

    allocatable: dict[str, QuantityValue] | None = None
    capacity: dict[str, QuantityValue] | None = None

    def cpu(self) -> QuantityValue | None:
        """Allocatable CPU, else capacity CPU, else None."""
        return (self.allocatable or self.capacity or {}).get("cpu")


class Node(BaseModel):
    """v1.Node: name, labels (clock label) and status."""

    model_config = READ

    metadata: NamedMeta
    status: NodeStatus | None = None


class NodeList(BaseModel):
    """v1.NodeList."""

    model_config = READ

    items: list[Node]


class ExtenderArgs(BaseModel):
    """What kube-scheduler sends to filter and prioritize: the pod, and either full Node objects
    (``nodeCacheCapable: false``) or node names (``nodeCacheCapable: true``)."""

    model_config = READ

    Pod: Pod
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None

    @model_validator(mode="after")
    def _one_node_form(self) -> ExtenderArgs:
        if self.Nodes is None and self.NodeNames is None:
            raise ValueError("ExtenderArgs needs 'Nodes' (a NodeList) or 'NodeNames'")
        return self

    def node_names(self) -> list[str]:
        """The candidate nodes' names, in request order."""
        if self.Nodes is not None:
            return [n.metadata.name for n in self.Nodes.items]
        return list(self.NodeNames or [])

    def annotations(self) -> dict[str, str]:
        return self.Pod.metadata.annotations or {}


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
