"""The Ray pool's placement check (servers that the cluster cannot hold fail at once, by name)
and each actor's runtime environment."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from hetsched.slim.serving.config import ServerConfig
from hetsched.slim.serving.pool import actor_environment, unplaceable


def test_servers_that_fit_the_cluster_are_placeable():
    servers = [ServerConfig(name="a"), ServerConfig(name="b", device="cuda", num_cpus=0.5)]
    assert unplaceable(servers, {"CPU": 2.0, "GPU": 1.0}) is None


@pytest.mark.parametrize(
    ("servers", "resources", "message"),
    [
        ([ServerConfig(name="a", device="cuda:0")], {"CPU": 16.0}, "1 GPU(s) in all and the Ray"),
        ([ServerConfig(name="a"), ServerConfig(name="b")], {"CPU": 1.0}, "2 CPU(s) in all and the"),
        ([ServerConfig(name="a", num_cpus=1.5)], {"CPU": 1.0, "GPU": 8.0}, "1.5 CPU(s)"),
    ],
)  # fmt: skip
def test_servers_beyond_the_cluster_are_named_with_what_is_missing(servers, resources, message):
    problem = unplaceable(servers, resources)
    assert problem is not None and message in problem


@pytest.mark.parametrize(
    ("onednn", "torch_lru", "variables"),
    [
        (256, 64, {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256", "LRU_CACHE_CAPACITY": "64"}),
        (0, None, {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}),
        (None, 8, {"LRU_CACHE_CAPACITY": "8"}),
    ],
)
def test_an_actor_gets_its_convolution_cache_caps_as_environment_variables(
    onednn, torch_lru, variables
):
    server = ServerConfig(
        name="a", onednn_cache_capacity=onednn, torch_lru_cache_capacity=torch_lru
    )
    assert actor_environment(server) == {"env_vars": variables}


def test_without_caps_an_actor_keeps_the_jobs_environment():
    server = ServerConfig(name="a", onednn_cache_capacity=None, torch_lru_cache_capacity=None)
    assert actor_environment(server) is None
    defaults = ServerConfig(name="a")
    assert (defaults.onednn_cache_capacity, defaults.torch_lru_cache_capacity) == (256, 64)
