"""Alibaba GPU 2023 ("Beware of Fragmentation", ATC'23): ``openb_pod_list_*.csv`` and the node
list ``openb_node_list_gpu_node.csv`` that defines the cluster.

Pods: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time`` (seconds). A pod is a job submitted at ``creation_time`` that ran
from ``scheduled_time`` to ``deletion_time``; pods never scheduled are excluded and counted.
``gpu_spec`` like ``V100M16|V100M32`` is the allowed-type set. A GPU share (``gpu_milli`` < 1000)
occupies one whole GPU (GPU sharing is not simulated). Nodes: ``sn, cpu_milli, memory_mib, gpu,
model``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.traces.common import RowReader, Trace, rebase
from hetsched.jobs.traces.job_table import Job

POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
NODE_LIST_NAME = "openb_node_list_gpu_node.csv"


def _dict_rows(reader: RowReader, columns: tuple[str, ...]):
    path = reader.path
    if not path.is_file():
        raise reader.error("trace file not found", None)
    with path.open(newline="") as handle:
        rows = csv.DictReader(handle)
        absent = [c for c in columns if c not in (rows.fieldnames or [])]
        if absent:
            raise reader.error(f"missing columns {absent}", 1)
        yield from enumerate(rows, start=2)


def load_alibaba2023_nodes(path: str | Path) -> Cluster:
    """The cluster of ``openb_node_list_gpu_node.csv`` (bad rows are always errors here)."""
    reader = RowReader(Path(path), "alibaba2023-nodes", skip_bad_rows=False)
    nodes = []
    for n, row in _dict_rows(reader, NODE_COLUMNS):
        nodes.append(
            Node(
                name=row["sn"].strip(),
                gpu_type=row["model"].strip(),
                num_gpus=int(reader.number(row["gpu"], n, "gpu", minimum=0)),
                cpus=reader.number(row["cpu_milli"], n, "cpu_milli", minimum=1) / 1000.0,
                memory_mib=reader.number(row["memory_mib"], n, "memory_mib", minimum=1),
            )
        )
    return Cluster(nodes, name="alibaba2023")


def load_alibaba2023(path: str | Path, skip_bad_rows: bool = False) -> Trace:
    """Loads a pod list; the node list beside it (if present) becomes ``Trace.cluster``."""
    path = Path(path)
    reader = RowReader(path, "alibaba2023", skip_bad_rows)
    for line_no, row in _dict_rows(reader, POD_COLUMNS):

        def parse(row: dict = row, n: int = line_no) -> Job | None:
            if None in row or any(v is None for v in row.values()):
                raise reader.error("wrong number of columns", n)
            if not row["scheduled_time"].strip():
                reader.exclude("never scheduled")
                return None
            num = reader.number
            scheduled = num(row["scheduled_time"], n, "scheduled_time", minimum=0)
            deleted = num(row["deletion_time"], n, "deletion_time", minimum=0)
            if deleted < scheduled:
                raise reader.error("deletion before scheduling", n, "deletion_time")
            spec = {t.strip() for t in row["gpu_spec"].split("|") if t.strip()}
            return Job(
                id=row["name"].strip(),
                submit_time_s=num(row["creation_time"], n, "creation_time", minimum=0),
                run_time_s=deleted - scheduled,
                num_gpus=int(num(row["num_gpu"], n, "num_gpu", minimum=0)),
                requested_time_s=math.nan,
                gpu_types=frozenset(spec) if spec else None,
                cpus=num(row["cpu_milli"], n, "cpu_milli", minimum=0) / 1000.0,
                memory_mib=num(row["memory_mib"], n, "memory_mib", minimum=0),
                status=row["pod_phase"].strip().lower(),
                qos=row["qos"].strip(),
            )

        reader.add(line_no, parse)
    node_list = path.with_name(NODE_LIST_NAME)
    cluster = load_alibaba2023_nodes(node_list) if node_list.is_file() else None
    return rebase(reader.finish(cluster))
