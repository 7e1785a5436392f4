"""The msgspec decoder of ExtenderArgs against strict pydantic models of the same wire types.

``Reference*`` below are written with pydantic, as the extender parsed requests before msgspec
(every field the extender reads declared, the rest ignored: of a Node, its name, clock label and
allocatable/capacity cpu). For generated bodies, full Node objects with odd-but-valid fields and
junk alike, the decoder must accept exactly what they accept, read the same values, and the
extender must answer the same (prioritize and filter) from either. Out of the comparison: bodies
that are not strict JSON (NaN, invalid UTF-8) and numbers beyond a double in a field the extender
reads, which the pydantic JSON parser lets through in places and which are always a 400.
"""

from __future__ import annotations

import json

import msgspec
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import SHARE_WITHIN, Extender
from hetsched.tail.extender_api import MalformedArgsError, decode_args, decode_args_with_items
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.scoring import P90Scorer
from hetsched.tail.telemetry import NodeTelemetry
from tests.tail.test_extender import CpuBoundRegressor

FREQ = "hetsched.io/cpu-freq-ghz"
READ = ConfigDict(strict=True, extra="ignore", frozen=True)


class ReferenceMeta(BaseModel):
    model_config = READ
    name: str = ""
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ReferenceNodeLabels(BaseModel):
    model_config = READ
    cpu_freq_ghz: str | None = Field(None, alias=FREQ)


class ReferenceNodeMeta(BaseModel):
    model_config = READ
    name: str = Field(min_length=1)
    labels: ReferenceNodeLabels | None = None


class ReferencePod(BaseModel):
    model_config = READ
    metadata: ReferenceMeta = ReferenceMeta()


class ReferenceResources(BaseModel):
    model_config = READ
    cpu: str | int | float | None = None


class ReferenceStatus(BaseModel):
    model_config = READ
    allocatable: ReferenceResources | None = None
    capacity: ReferenceResources | None = None

    def cpu(self) -> str | int | float | None:
        for resources in (self.allocatable, self.capacity):
            if resources is not None and resources.cpu is not None:
                return resources.cpu
        return None


class ReferenceNode(BaseModel):
    model_config = READ
    metadata: ReferenceNodeMeta
    status: ReferenceStatus | None = None


class ReferenceNodeList(BaseModel):
    model_config = READ
    items: list[ReferenceNode]


class ReferenceArgs(BaseModel):
    model_config = READ
    Pod: ReferencePod
    Nodes: ReferenceNodeList | None = None
    NodeNames: list[str] | None = None

    @model_validator(mode="after")
    def _one_node_form(self) -> ReferenceArgs:
        if self.Nodes is None and self.NodeNames is None:
            raise ValueError("ExtenderArgs needs 'Nodes' (a NodeList) or 'NodeNames'")
        return self

    def node_names(self) -> list[str]:
        if self.Nodes is not None:
            return [n.metadata.name for n in self.Nodes.items]
        return list(self.NodeNames or [])

    def annotations(self) -> dict[str, str]:
        return self.Pod.metadata.annotations or {}


def reference(body: bytes) -> ReferenceArgs | None:
    try:
        return ReferenceArgs.model_validate_json(body)
    except ValidationError:
        return None


def current(body: bytes):
    try:
        return decode_args(body)
    except MalformedArgsError:
        return None


def meta_view(meta) -> tuple:
    return (meta.name, meta.namespace, meta.labels, meta.annotations)


def resources_view(resources) -> tuple | None:
    return None if resources is None else (type(resources.cpu), resources.cpu)


def view(args) -> tuple:
    """Every value the extender can read from a request, with its Python type."""
    nodes = None
    if args.Nodes is not None:
        nodes = [
            (
                n.metadata.name,
                None if n.metadata.labels is None else n.metadata.labels.cpu_freq_ghz,
                None
                if n.status is None
                else (resources_view(n.status.allocatable), resources_view(n.status.capacity)),
                None if n.status is None else (type(n.status.cpu()), n.status.cpu()),
            )
            for n in args.Nodes.items
        ]
    return (meta_view(args.Pod.metadata), nodes, args.NodeNames, args.node_names())


NAMES = [f"node{i}" for i in range(6)]
quantities = st.sampled_from(
    ["500m", "1.5", "2", "2k", "64Gi", "12000m", "1e3", "0", "-1", "abc", "", 4, 1.5, 0, -2, 10**30]
)
# A value of each JSON type that some declared field does not take.
junk = st.sampled_from([None, True, False, 0, 7, -1, 10**20, 2.5, "x", [], [1], {}, {"a": 1}])
conditions = st.lists(st.fixed_dictionaries({"type": st.just("Ready")}), max_size=2)


@st.composite
def request_args(draw: st.DrawFn) -> dict:
    """ExtenderArgs as kube-scheduler sends them, with every optional field present or not;
    in most examples one field (at any depth) replaced by junk of another type."""
    junk_at = draw(st.none() | st.integers(0, 30))
    fields_drawn = [0]

    def value(valid: st.SearchStrategy) -> object:
        fields_drawn[0] += 1
        return draw(junk) if fields_drawn[0] - 1 == junk_at else draw(valid)

    def some(**fields: st.SearchStrategy) -> dict:
        return {k: value(v) for k, v in fields.items() if draw(st.booleans())}

    def string_map() -> dict:
        keys = draw(st.lists(st.sampled_from([FREQ, "zone", "os"]), unique=True, max_size=3))
        freqs = st.sampled_from(["2.3", "3.1", "0", "abc"])
        return {k: value(freqs if k == FREQ else st.text(max_size=5)) for k in keys}

    def amounts() -> dict:
        names = ["cpu", "memory", "pods", "nvidia.com/gpu"]
        return {k: value(quantities) for k in names if draw(st.integers(0, 3)) > (k != "cpu")}

    def node() -> dict:
        name = value(st.sampled_from(NAMES) | st.text(max_size=8))
        meta = {"name": name} | some(namespace=st.text(max_size=3))
        meta |= some(labels=st.just(string_map()), annotations=st.just(string_map()))
        status = some(allocatable=st.just(amounts()), capacity=st.just(amounts()))
        status |= some(conditions=conditions)
        extra = some(uid=st.text(max_size=8), spec=st.just({"taints": [{"key": "k"}]}))
        return {"metadata": value(st.just(meta))} | extra | some(status=st.just(status))

    annotations = {"hetsched.io/model": draw(st.sampled_from(["resnet50", "cnn-s", "nope"]))}
    annotations |= some(**{"hetsched.io/p90-slo-ms": st.sampled_from(["60", "150", "x"])})
    pod_meta = some(name=st.text(max_size=5)) | {"annotations": value(st.just(annotations))}
    args: dict = {"Pod": value(st.just({"metadata": value(st.just(pod_meta))}))}
    if draw(st.booleans()):
        items = [node() for _ in range(draw(st.integers(0, 6)))]
        args["Nodes"] = value(st.just({"items": items}))
    else:
        names = [value(st.sampled_from(NAMES)) for _ in range(draw(st.integers(0, 6)))]
        args["NodeNames"] = value(st.just(names))
    return args


@pytest.fixture(scope="module")
def extender() -> Extender:
    """Half the named nodes have a live reading (one too slow for a 150 ms SLO under its load,
    and for 60 ms even idle); the others are scored from their objects."""
    telemetry = NodeTelemetry(ttl_s=3600.0)
    loads = [(1.0, 0.9), (4.0, 0.5), (8.0, 0.2)]
    telemetry.update(NodeCapacity(n, c, 2.3, u, u) for n, (c, u) in zip(NAMES, loads, strict=False))
    scorer = P90Scorer(CpuBoundRegressor(), share_within=SHARE_WITHIN)
    return Extender(scorer, default_catalog(), telemetry)


def answers(extender: Extender, parsed, items: list | None) -> tuple:
    """prioritize's and filter's replies as JSON values, and what each fell back on."""
    priorities, outcome = extender.prioritize(parsed)
    result, filtered = extender.filter(parsed, items)
    return priorities, outcome, orjson.loads(msgspec.json.encode(result)), filtered


def assert_same(extender: Extender, body: bytes) -> bool:
    """The decoder and the previous models agree on ``body``; whether it was accepted."""
    before, after = reference(body), current(body)
    assert (before is None) == (after is None), body[:300]
    if after is None:
        return False
    assert view(after) == view(before)
    _, raw_items = decode_args_with_items(body)
    items = orjson.loads(body)["Nodes"]["items"] if before.Nodes is not None else None
    assert answers(extender, after, raw_items) == answers(extender, before, items)
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_args())
def test_the_decoder_accepts_reads_and_answers_as_the_previous_models(extender, args):
    assert_same(extender, json.dumps(args).encode())


@pytest.mark.parametrize("seed", range(3))
def test_large_generated_node_lists_answer_the_same(extender, seed):
    """Seeded lists of 2,000 full Node objects: every quantity form, labels or none, status or
    none, capacity without allocatable, and the fields a real Node carries besides."""
    rng = np.random.default_rng(seed)
    forms = ["500m", "1.5", "2", "2k", "64Gi", "12000m", "1e3", 4, 1.5, "0", "bad", None]
    items = []
    for i in range(2000):
        cpu = forms[int(rng.integers(len(forms)))]
        amounts = {"memory": "64Gi", "pods": "110"} | ({} if cpu is None else {"cpu": cpu})
        meta: dict = {"name": f"node{i}", "uid": f"u{i}", "resourceVersion": str(i)}
        if rng.random() < 0.6:
            meta["labels"] = {FREQ: str(rng.choice(["2.3", "3.1", "x"])), "zone": "a"}
        node: dict = {"metadata": meta, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
        where = rng.choice(["allocatable", "capacity", "both", "none", "empty allocatable"])
        if where != "none":
            node["status"] = {
                "allocatable": {} if where == "empty allocatable" else amounts,
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            if where in ("capacity", "both", "empty allocatable"):
                node["status"]["capacity"] = amounts | {"cpu": "8"}
            if where == "capacity":
                del node["status"]["allocatable"]
        items.append(node)
    annotations = {"hetsched.io/model": "resnet50", "hetsched.io/p90-slo-ms": "100"}
    body = json.dumps(
        {"Pod": {"metadata": {"annotations": annotations}}, "Nodes": {"items": items}}
    ).encode()
    assert assert_same(extender, body)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": 7}}]}}', "items[0].metadata.name"),
        (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": ""}}]}}', "length >= 1"),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a", "labels":'
            b' {"hetsched.io/cpu-freq-ghz": 1}}}]}}',
            "metadata.labels",
        ),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"},'
            b' "status": {"allocatable": {"cpu": true}}}]}}',
            "status.allocatable",
        ),
        (b'{"Pod": {}}', "needs 'Nodes'"),
        (b'{"Pod": {}, "NodeNames": [], "x": "\xff"}', "not UTF-8"),
        (b'{"Pod": {}, "NodeNames": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "deeply"),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"},'
            b' "status": {"capacity": {"cpu": 1e999}}}]}}',
            "out of range",
        ),
        (b'{"Pod": {}, "NodeNames": []} trailing', "malformed"),
    ],
)
def test_malformed_requests_say_what_is_wrong(body, says):
    with pytest.raises(MalformedArgsError) as raised:
        decode_args(body)
    assert says in str(raised.value)


def test_filter_returns_kept_node_objects_byte_for_byte():
    text = b'{"metadata": {"name": "a", "x": "\\u00e9"},  "spec": {"k": [1, 2.50]}}'
    body = b'{"Pod": {}, "Nodes": {"items": [' + text + b"]}}"
    args, raw_items = decode_args_with_items(body)
    assert args.node_names() == ["a"] and raw_items is not None
    assert [bytes(raw) for raw in raw_items] == [text]
