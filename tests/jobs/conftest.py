"""Shared fixtures of the RLTune tests: fixture paths, the shared data folder, small clusters."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.jobs.cluster.model import Cluster, Node

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_DATA = (Path(__file__).resolve().parents[2] / "../shared/data").resolve()


@pytest.fixture
def fixtures() -> Path:
    """Folder of the committed tiny traces."""
    return FIXTURES


@pytest.fixture
def shared_traces() -> Path:
    """``<repo>/../shared/data/traces``; skips when the shared data is absent."""
    traces = SHARED_DATA / "traces"
    if not traces.is_dir():
        pytest.skip(f"shared data not found at {traces}")
    return traces


@pytest.fixture
def hetero_cluster() -> Cluster:
    """Two V100 nodes (4 GPUs, 16 CPUs, 64 GiB) and two P100 nodes (8 GPUs), P100 at half speed."""
    nodes = [
        Node("v0", "V100", 4, 16.0, 65536.0),
        Node("v1", "V100", 4, 16.0, 65536.0),
        Node("p0", "P100", 8, 32.0, 131072.0),
        Node("p1", "P100", 8, 32.0, 131072.0),
    ]
    return Cluster(nodes, {"V100": 1.0, "P100": 0.5}, name="hetero")
