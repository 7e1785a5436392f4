"""The extender's vectorised hot path against a node-by-node reference written here.

The reference reads each node one at a time, as the extender's semantics describe them (module
docstring of :mod:`hetsched.tail.extender`): a fresh telemetry reading wins; a stale one makes the
node neutral; without a reading a Node object gives its allocatable CPU, idle, and a bare name is
neutral. Nodes whose eq. 8 inputs fall in the same cell of the 5 % log grid are predicted once,
at the inputs of the first such node in request order. Seeded random clusters mix every case.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import orjson
import pytest

from hetsched.core.errors import HetschedError
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import CACHED_ROWS, SHARE_WITHIN, Extender
from hetsched.tail.extender_api import ExtenderArgs, decode_args
from hetsched.tail.node_features import NodeCapacity
from hetsched.tail.scoring import NEUTRAL_SCORE, P90Scorer, idle_capacity, scores_from_p90
from hetsched.tail.telemetry import NodeTelemetry
from tests.tail.test_extender import Clock, CpuBoundRegressor

MODEL = "resnet50"
CPU_QUANTITIES = [1, 2, 4, "4", "8", "500m", "1.5", "12000m", 16, "32", "bad", None]


def decoded(args: dict) -> ExtenderArgs:
    """The request as the extender's HTTP service decodes it."""
    return decode_args(orjson.dumps(args))


def random_cluster(seed: int, nodes: int) -> tuple[dict, NodeTelemetry, Clock]:
    """A request with ``nodes`` Node objects (unique names, as the API server guarantees) and a
    telemetry cache that knows some of them freshly, some stale, and a node not in the request."""
    rng = np.random.default_rng(seed)
    clock = Clock()
    telemetry = NodeTelemetry(ttl_s=30.0, clock=clock)
    names = [f"n{int(i)}" for i in rng.choice(nodes * 2, nodes, replace=False)]

    def capacity(name: str) -> NodeCapacity:
        cores = float(rng.choice([1, 2, 4, 8, 16]))
        u = float(rng.uniform(0, 0.95))
        return NodeCapacity(name, cores, float(rng.choice([2.0, 2.3, 3.1])), u, u)

    known = [n for n in names if rng.random() < 0.7] + ["elsewhere"]
    stale = [n for n in known if rng.random() < 0.2]
    telemetry.update(capacity(n) for n in stale)
    clock.now_s += 40.0  # past the TTL: these readings are stale unless measured again
    telemetry.update(capacity(n) for n in known if n not in stale)
    items = []
    for name in names:
        node: dict = {"metadata": {"name": name}}
        cpu = CPU_QUANTITIES[int(rng.integers(len(CPU_QUANTITIES)))]
        if cpu is not None:
            node["status"] = {"allocatable": {"cpu": cpu}}
        if rng.random() < 0.5:
            node["metadata"]["labels"] = {"hetsched.io/cpu-freq-ghz": str(rng.choice([2.0, 3.5]))}
        items.append(node)
    pod = {"metadata": {"annotations": {"hetsched.io/model": MODEL}}}
    return {"Pod": pod, "Nodes": {"items": items}}, telemetry, clock


def reference_inputs(
    args: dict, telemetry: NodeTelemetry
) -> tuple[list[str], list[tuple[float, float, float, float]], Counter[str]]:
    """Scorable names in request order, their (cpu_eff, freq_eff, cores, freq), neutral counts."""
    view = telemetry.view()
    names, columns, neutral = [], [], Counter[str]()
    nodes = args["Nodes"]["items"] if "Nodes" in args else args["NodeNames"]
    for node in nodes:
        name = node if isinstance(node, str) else node["metadata"]["name"]
        reading, stale = view.lookup(name)
        if reading is not None and not stale:
            c = reading.capacity
            names.append(name)
            columns.append((c.cpu_eff, c.freq_eff_ghz, c.cores, c.freq_ghz))
        elif reading is not None:
            neutral["stale"] += 1
        elif isinstance(node, str):
            neutral["unknown_node"] += 1
        elif node.get("status") is None:
            neutral["no_capacity"] += 1
        else:
            cpu, labels = node["status"]["allocatable"]["cpu"], node["metadata"].get("labels")
            try:
                idle = idle_capacity(name, cpu, labels)
            except HetschedError:
                neutral["bad_capacity"] += 1
                continue
            names.append(name)
            columns.append((idle.cores, idle.freq_ghz, idle.cores, idle.freq_ghz))
    return names, columns, neutral


def reference_p90(regressor, pairs: list[tuple[float, float]]) -> list[float]:
    """One prediction per 5 % grid cell, at its first node's inputs, one regressor row each."""
    model = default_catalog().models[MODEL]
    step = math.log1p(SHARE_WITHIN)
    first: dict[tuple[float, float], tuple[float, float]] = {}
    for cpu, freq in pairs:
        cell = tuple(round(math.log(max(v, 1e-9)) / step) for v in (cpu, freq))
        first.setdefault(cell, (cpu, freq))  # type: ignore[arg-type]
    p90 = {}
    for cell, (cpu, freq) in first.items():
        row = {"size_mb": model.size_mb, "flops": model.flops, "cpu_eff": cpu, "freq_eff_ghz": freq}
        p90[cell] = float(regressor.predict_p90_s([row])[0])
    return [
        p90[tuple(round(math.log(max(v, 1e-9)) / step) for v in (cpu, freq))]  # type: ignore[index]
        for cpu, freq in pairs
    ]


def reference_priorities(regressor, args: dict, telemetry: NodeTelemetry) -> list[dict]:
    names, columns, _ = reference_inputs(args, telemetry)
    p90 = reference_p90(regressor, [(c[0], c[1]) for c in columns])
    scores = scores_from_p90(dict(zip(names, p90, strict=True))) if names else {}
    all_names = [n["metadata"]["name"] for n in args["Nodes"]["items"]] if "Nodes" in args else []
    all_names = all_names or args["NodeNames"]
    return [{"Host": n, "Score": scores.get(n, NEUTRAL_SCORE)} for n in all_names]


@pytest.fixture(scope="module", params=["cpu_bound", "forest"])
def regressor(request, fitted):
    return CpuBoundRegressor() if request.param == "cpu_bound" else fitted


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["nodes", "names"])
def test_priorities_equal_the_node_by_node_reference(regressor, seed, mode):
    args, telemetry, _ = random_cluster(seed, nodes=[3, 40, 300][seed % 3])
    if mode == "names":
        names = [n["metadata"]["name"] for n in args["Nodes"]["items"]]
        args = {"Pod": args["Pod"], "NodeNames": names}
    scorer = P90Scorer(regressor, share_within=SHARE_WITHIN, cached_rows=CACHED_ROWS)
    extender = Extender(scorer, default_catalog(), telemetry)
    expected = reference_priorities(regressor, args, telemetry)
    for _ in range(2):  # the second answer comes from the scorer's cache
        got, outcome = extender.prioritize(decoded(args))
        assert got == expected
        assert outcome.neutral_nodes == reference_inputs(args, telemetry)[2]
        assert outcome.model_fallback is None


def test_cached_rows_are_asked_once_and_the_cache_stays_bounded():
    asked: list[int] = []

    class Counting(CpuBoundRegressor):
        def predict_p90_s(self, rows: list[dict]) -> np.ndarray:
            asked.append(len(rows))
            return super().predict_p90_s(rows)

    args, telemetry, clock = random_cluster(7, nodes=300)
    request = decoded(args)
    scorer = P90Scorer(Counting(), share_within=SHARE_WITHIN, cached_rows=1000)
    extender = Extender(scorer, default_catalog(), telemetry)
    first, _ = extender.prioritize(request)
    again, _ = extender.prioritize(request)
    assert again == first and len(asked) == 1 and asked[0] > 20
    rng = np.random.default_rng(1)  # a refresh: new loads, new rows
    clock.now_s += 1.0
    telemetry.update(
        NodeCapacity(n, 8.0, 2.3, u, u)
        for n, u in zip(telemetry.view().readings, rng.uniform(0, 0.9, len(telemetry)), strict=True)
    )
    refreshed, _ = extender.prioritize(request)
    assert len(asked) == 2 and refreshed == reference_priorities(Counting(), args, telemetry)
    small = P90Scorer(Counting(), share_within=SHARE_WITHIN, cached_rows=10)
    Extender(small, default_catalog(), telemetry).prioritize(request)
    assert len(small._cache) <= 10


@pytest.mark.parametrize("seed", range(4))
def test_filter_equals_the_node_by_node_reference(seed):
    regressor = CpuBoundRegressor()
    args, telemetry, _ = random_cluster(seed, nodes=200)
    slo_ms = 60.0
    args["Pod"]["metadata"]["annotations"]["hetsched.io/p90-slo-ms"] = f"{slo_ms:g}"
    names, columns, _ = reference_inputs(args, telemetry)
    live = reference_p90(regressor, [(c[0], c[1]) for c in columns])
    over = [i for i, p in enumerate(live) if p * 1e3 > slo_ms]  # only these are asked idle
    idle = reference_p90(regressor, [(columns[i][2], columns[i][3]) for i in over])
    never = {names[i] for i, p in zip(over, idle, strict=True) if p * 1e3 > slo_ms}
    failed = {names[i] for i, p in zip(over, idle, strict=True) if p * 1e3 <= slo_ms}
    extender = Extender(
        P90Scorer(regressor, share_within=SHARE_WITHIN), default_catalog(), telemetry
    )
    items = args["Nodes"]["items"]
    result, _ = extender.filter(decoded(args), items)
    assert set(result["FailedAndUnresolvableNodes"]) == never
    assert set(result["FailedNodes"]) == failed and failed and never
    assert result["Nodes"]["items"] == [
        n for n in items if n["metadata"]["name"] not in failed | never
    ]
