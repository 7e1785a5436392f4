"""The sample traces shipped in the package: they load by name from any command, stay small, are
described in the data card, and are exact cuts of the public traces they come from."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hetsched.core.errors import HetschedError
from hetsched.jobs.cluster.slicing import slice_cluster
from hetsched.jobs.traces.alibaba2023 import load_alibaba2023_nodes
from hetsched.jobs.traces.samples import SAMPLE_DIR, SAMPLES, resolve_trace, sample_path
from hetsched.jobs.traces.source import load_jobs

MAX_SAMPLE_BYTES = 200_000
#: Pods cut from the head of the public pod list, and the node slice beside them (data card).
ALIBABA_PODS = 800
ALIBABA_SLICE = 0.01


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_loads_by_name_with_its_cluster(name: str) -> None:
    loaded = load_jobs(f"sample:{name}")
    assert loaded.name == f"sample:{name}"
    assert 100 <= len(loaded.jobs) <= 1000
    assert loaded.cluster is not None and loaded.cluster.total_gpus > 0


def test_sample_files_are_small_and_described_in_the_data_card() -> None:
    files = [p for p in SAMPLE_DIR.rglob("*") if p.is_file() and p.suffix != ".md"]
    assert files and all(p.stat().st_size < MAX_SAMPLE_BYTES for p in files)
    card = (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    for name in SAMPLES:
        assert f"`sample:{name}`" in card
        assert sample_path(name).is_file()
    assert "Licence" in card and "CC BY 4.0" in card


def test_an_unknown_sample_is_one_line_listing_the_known_ones(tmp_path) -> None:
    with pytest.raises(HetschedError, match=r"unknown sample trace sample:philly; known: sample:"):
        load_jobs("sample:philly")
    assert resolve_trace(tmp_path / "t.csv") == tmp_path / "t.csv"  # files pass through
    command = "from hetsched.cli import app; app()"
    result = subprocess.run(
        [sys.executable, "-c", command, "jobs", "trace-info", "sample:nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "unknown sample trace sample:nope; known: sample:alibaba2023" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_alibaba_sample_is_an_exact_cut_of_the_public_trace(shared_traces) -> None:
    source = shared_traces / "alibaba-gpu-2023"
    pods = (source / "openb_pod_list_gpuspec33.csv").read_text().splitlines()
    sample = sample_path("alibaba2023")
    assert sample.read_text().splitlines() == pods[: ALIBABA_PODS + 1]
    full = load_alibaba2023_nodes(source / "openb_node_list_gpu_node.csv")
    kept = {node.name for node in slice_cluster(full, ALIBABA_SLICE).nodes}
    nodes = (source / "openb_node_list_gpu_node.csv").read_text().splitlines()
    expected = [nodes[0]] + [row for row in nodes[1:] if row.split(",")[0] in kept]
    assert (sample.parent / "openb_node_list_gpu_node.csv").read_text().splitlines() == expected
