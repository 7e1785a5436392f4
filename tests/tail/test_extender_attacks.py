"""A pod's model annotation cannot make the extender fetch, open or run anything (issue 15).

Pods name an http:// URL, a file:// URL, an absolute path and a crafted .pt file. Every network
connection and every file open is recorded while the extender answers them over HTTP: none may
happen (the catalogue was read at start-up), the payload must not run, and the answer is the
documented fallback (200, neutral scores, nothing filtered) with the miss counted.
"""

from __future__ import annotations

import builtins
import io
import json
import pathlib
import pickle
import socket
import urllib.request
from pathlib import Path

import httpx
import pytest

from hetsched.core.web import ServiceConfig
from hetsched.core.web_server import ServiceServer
from hetsched.tail.catalog import default_catalog
from hetsched.tail.extender import Extender
from hetsched.tail.extender_app import create_extender_app
from hetsched.tail.scoring import NEUTRAL_SCORE, P90Scorer

FIXTURES = Path(__file__).parent / "fixtures"
MARKER = "payload-ran"


class Payload:
    """Pickled, this object runs ``__reduce__``'s call on load: the old RCE."""

    def __reduce__(self):
        return (builtins.print, (MARKER,))


@pytest.fixture
def crafted_pt(tmp_path) -> Path:
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(Payload()))
    return path


def install_trap(monkeypatch) -> dict[str, list]:
    """Records every connect and open from now on; a connect also fails outright."""
    seen: dict[str, list] = {"connect": [], "open": [], "urlopen": []}
    real_open, real_path_open = builtins.open, pathlib.Path.open

    def connect(self, address, *a, **k):
        seen["connect"].append(address)
        raise AssertionError(f"network access to {address}")

    def record_open(file, *a, **k):
        seen["open"].append(str(file))
        return real_open(file, *a, **k)

    def record_path_open(self, *a, **k):
        seen["open"].append(str(self))
        return real_path_open(self, *a, **k)

    def urlopen(url, *a, **k):
        seen["urlopen"].append(url)
        raise AssertionError(f"urlopen {url}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    monkeypatch.setattr(builtins, "open", record_open)
    monkeypatch.setattr(io, "open", record_open)
    monkeypatch.setattr(pathlib.Path, "open", record_path_open)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return seen


def attacker_refs(crafted_pt: Path) -> list[str]:
    return [
        "http://169.254.169.254/latest/meta-data/model.pt",
        "https://attacker.example/model.onnx",
        crafted_pt.as_uri(),
        str(crafted_pt),
        "/etc/passwd",
        "evil.pt",
        "../../../../etc/shadow",
    ]


def test_annotations_naming_urls_paths_and_pt_files_touch_nothing(
    fitted, crafted_pt, monkeypatch, capsys
):
    extender = Extender(P90Scorer(fitted), default_catalog())
    config = ServiceConfig()
    server = ServiceServer(create_extender_app(extender, config), config)
    url = server.start()
    args = json.loads((FIXTURES / "extender_args_nodes.json").read_text())
    try:
        with httpx.Client() as client:
            assert client.get(f"{url}/healthz").status_code == 200  # the kept-alive connection
            seen = install_trap(monkeypatch)
            for ref in attacker_refs(crafted_pt):
                annotations = args["Pod"]["metadata"]["annotations"]
                annotations["hetsched.io/model"] = ref
                annotations["hetsched.io/p90-slo-ms"] = "0.001"  # would filter every node
                scores = client.post(f"{url}/prioritize", json=args)
                assert scores.status_code == 200, ref
                assert {h["Score"] for h in scores.json()} == {NEUTRAL_SCORE}, ref
                kept = client.post(f"{url}/filter", json=args)
                assert kept.status_code == 200, ref
                assert len(kept.json()["Nodes"]["items"]) == 4, ref
                assert kept.json()["FailedNodes"] == {}, ref
            metrics = client.get(f"{url}/metrics").text
            monkeypatch.undo()
    finally:
        server.stop()
    assert seen == {"connect": [], "open": [], "urlopen": []}
    assert MARKER not in capsys.readouterr().out
    # Six are not even key-shaped; "evil.pt" is, and is simply not in the catalogue.
    assert 'hetsched_extender_model_fallbacks_total{reason="invalid"} 12.0' in metrics
    assert 'hetsched_extender_model_fallbacks_total{reason="unknown"} 2.0' in metrics
