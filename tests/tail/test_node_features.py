"""Eqs. 6-8 and the three telemetry paths (psutil, node_exporter data, per-node agent)."""

from __future__ import annotations

import httpx
import pytest

from hetsched.core.errors import DataError
from hetsched.tail.node_agent import serve_agent
from hetsched.tail.node_features import (
    NodeCapacity,
    capacity_from_agent_json,
    capacity_from_node_exporter,
    effective_cores,
    effective_freq,
    local_capacity,
    utilisation_fractions,
)


def test_eqs_6_to_8():
    assert effective_cores(16, 0.25) == 12.0  # eq. 6
    assert effective_freq(2.3, 0.5) == pytest.approx(1.15)  # eq. 7
    cap = NodeCapacity("n", 8, 2.0, 0.5, 0.25)
    assert (cap.cpu_eff, cap.freq_eff_ghz) == (4.0, 1.5)  # eq. 8
    with pytest.raises(DataError, match="U_C"):
        effective_cores(4, 1.5)


def test_utilisation_fractions():
    u_c, u_f = utilisation_fractions([1.0, 0.9, 0.1, 0.0])
    assert u_c == pytest.approx(0.5) and u_f == pytest.approx(0.5)
    assert utilisation_fractions([1.5, -0.2]) == (0.5, 0.5)  # clipped to [0, 1]
    with pytest.raises(DataError):
        utilisation_fractions([])


def test_node_exporter_and_agent_payloads():
    cap = capacity_from_node_exporter("n1", {"0": 0.2, "1": 1.0}, {"0": 2.3e9, "1": 2.3e9})
    assert cap.cores == 2 and cap.u_cores == pytest.approx(0.4) == cap.u_freq
    assert cap.cpu_eff == pytest.approx(1.2)
    assert cap.freq_ghz == pytest.approx(2.3)
    got = capacity_from_agent_json({"name": "a", "freq_ghz": 3.0, "per_core_busy": [0.0, 1.0]})
    assert got.cpu_eff == 1.0 and got.freq_eff_ghz == pytest.approx(1.5)
    with pytest.raises(DataError, match="agent"):
        capacity_from_agent_json({"name": "a"})


def test_local_psutil_and_agent_round_trip():
    cap = local_capacity("here", [0], window_s=0.05, freq_ghz=2.3)
    assert cap.cores == 1 and 0 <= cap.cpu_eff <= 1
    server = serve_agent("me")
    try:
        payload = httpx.get(f"{server.url}/").json()
        assert capacity_from_agent_json(payload).name == "me"
        assert httpx.get(f"{server.url}/nope").json()["reason"] == "not_found"  # shared stack
    finally:
        server.stop()
