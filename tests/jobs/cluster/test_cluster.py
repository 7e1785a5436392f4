"""Cluster specs, free-resource state and the pack/spread placers."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import ConfigError, UnknownNameError
from hetsched.jobs.cluster.catalog import CLUSTERS, homogeneous_pool, with_speed_factors
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.cluster.specs import load_cluster
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.placers import (
    JobRequest,
    candidate_placements,
    capacity_per_node,
    min_nodes,
)
from hetsched.jobs.placement.registry import PLACERS


def _request(cluster, gpus, cpus=0.0, memory=0.0, types=None, vc=None):
    return JobRequest(gpus, cpus, memory, cluster.type_mask(types) & cluster.vc_mask(vc))


def test_yaml_cluster_and_bad_field(fixtures, tmp_path):
    cluster = load_cluster(fixtures / "small_cluster.yaml")
    assert [n.name for n in cluster.nodes] == ["v100-0", "v100-1", "p100-2", "p100-3"]
    assert cluster.total_gpus == 24 and cluster.speed_of("P100") == 0.5
    assert cluster.virtual_clusters == ["vc1", "vc2"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_groups:\n  - {gpu_type: V100, gpus_per_nod: 4}\n")
    with pytest.raises(ConfigError, match="gpus_per_nod"):
        load_cluster(bad)


def test_builtin_clusters_match_the_paper():
    helios = CLUSTERS.create("helios")
    assert helios.total_gpus == (16 + 12 + 10 + 8 + 8) * 8
    assert helios.virtual_clusters == ["vc1", "vc2", "vc3", "vc4", "vc5"]
    philly = CLUSTERS.create("philly")
    assert len(philly.nodes) == 552 and philly.total_gpus == 2490
    with pytest.raises(UnknownNameError, match="helios"):
        CLUSTERS.create("nope")
    assert with_speed_factors(CLUSTERS.create("alibaba")).speed_of("T4") < 1.0


def test_state_refuses_over_allocation_and_double_release(hetero_cluster):
    state = ClusterState(hetero_cluster)
    alloc = PLACERS.create("pack").place(_request(hetero_cluster, 4), state)
    state.allocate(alloc)
    with pytest.raises(RuntimeError, match="over-allocates"):
        state.allocate(alloc)
    state.release(alloc)
    with pytest.raises(RuntimeError, match="released twice"):
        state.release(alloc)


def test_pack_is_best_fit_and_spread_is_most_free(hetero_cluster):
    state = ClusterState(hetero_cluster)
    state.free_gpus[:] = [1, 3, 8, 5]
    pack = PLACERS.create("pack").place(_request(hetero_cluster, 2), state)
    spread = PLACERS.create("spread").place(_request(hetero_cluster, 2), state)
    assert pack.node_indices.tolist() == [1] and spread.node_indices.tolist() == [2]


def test_multi_node_job_uses_fewest_nodes_of_one_type(hetero_cluster):
    state = ClusterState(hetero_cluster)
    alloc = PLACERS.create("pack").place(_request(hetero_cluster, 12), state)
    assert alloc.gpu_type == "P100" and alloc.num_nodes == 2 and alloc.gpus.sum() == 12
    assert sorted(alloc.gpus.tolist()) == [4, 8]
    spread = PLACERS.create("spread").place(_request(hetero_cluster, 12), state)
    assert sorted(spread.gpus.tolist()) == [6, 6]
    # 8 V100 GPUs need both V100 nodes; a V100-only job never lands on a P100.
    v100 = PLACERS.create("pack").place(_request(hetero_cluster, 8, types={"V100"}), state)
    assert v100.gpu_type == "V100" and v100.num_nodes == 2
    assert PLACERS.create("pack").place(_request(hetero_cluster, 9, types={"V100"}), state) is None


def test_cpu_and_memory_per_node_are_enforced(hetero_cluster):
    state = ClusterState(hetero_cluster)
    # 4 GPUs with 40 CPUs: 10 CPUs per GPU; a V100 node (16 CPUs) hosts only 1 GPU's share.
    request = _request(hetero_cluster, 4, cpus=40.0, types={"V100"})
    assert capacity_per_node(request, state)[:2].tolist() == [1, 1]
    assert PLACERS.create("pack").place(request, state) is None
    state.free_memory_mib[2] = 1000.0
    memory_bound = _request(hetero_cluster, 2, memory=4000.0, types={"P100"})
    alloc = PLACERS.create("spread").place(memory_bound, state)
    assert alloc.node_indices.tolist() == [3]


def test_candidate_placements_cover_pack_spread_and_one_more_node(hetero_cluster):
    state = ClusterState(hetero_cluster)
    request = _request(hetero_cluster, 4, types={"P100"})
    assert min_nodes(request, state) == 1
    candidates = candidate_placements(request, state)
    keys = {c.key() for c in candidates}
    assert len(keys) == len(candidates) >= 2
    assert {c.num_nodes for c in candidates} == {1, 2}
    for c in candidates:
        assert c.gpus.sum() == 4 and state.fits(c)
    state.free_gpus[:] = 0
    assert candidate_placements(request, state) == []


def test_virtual_cluster_restricts_nodes(fixtures):
    cluster = load_cluster(fixtures / "small_cluster.yaml")
    state = ClusterState(cluster)
    alloc = PLACERS.create("pack").place(_request(cluster, 2, vc="vc2"), state)
    assert cluster.nodes[alloc.node_indices[0]].virtual_cluster == "vc2"
    assert not cluster.vc_mask("vc9").any()


def test_pool_and_cluster_validation():
    pool = homogeneous_pool(256)
    assert pool.total_gpus == 256 and np.isinf(pool.node_cpus[0])
    with pytest.raises(ConfigError, match="duplicate"):
        Cluster([Node("a", "T4", 1), Node("a", "T4", 1)])
    with pytest.raises(ConfigError, match="speed factor"):
        Cluster([Node("a", "T4", 1)], {"T4": 0.0})


def test_trace_vcs_map_onto_cluster_vcs_by_demand():
    from hetsched.jobs.cluster.virtual_clusters import map_virtual_clusters

    helios = CLUSTERS.create("helios")
    vcs = np.array(["vcA", "vcB", "vcA", "vc3", None, "vcC"], dtype=object)
    gpu_s = np.array([100.0, 500.0, 100.0, 1.0, 9.0, 50.0])
    mapping = map_virtual_clusters(vcs, gpu_s, helios)
    # Busiest foreign VC (vcB) -> largest cluster VC (vc1), then vcA -> vc2, vcC -> vc3.
    assert mapping == {"vcB": "vc1", "vcA": "vc2", "vcC": "vc3", "vc3": "vc3"}
    assert map_virtual_clusters(vcs, gpu_s, homogeneous_pool(8)) == {}
