"""A pod's model annotation cannot make the extender fetch, open or run anything (issue 15).

Pods name an http:// URL, a file:// URL, an absolute path and a crafted .pt file. Every network
connection and every file open is recorded while the extender answers them: none may happen, the
payload must not run, and the answer is the documented fallback (neutral scores, nothing filtered).
"""

from __future__ import annotations

import builtins
import io
import json
import pathlib
import pickle
import socket
import urllib.request
from importlib import resources
from pathlib import Path

import pytest

from hetsched.tail.catalog import DEFAULT_CATALOG_RESOURCE
from hetsched.tail.extender import NEUTRAL_SCORE, handle_filter, handle_prioritize
from hetsched.tail.scoring import P90Scorer

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


@pytest.fixture
def trap(monkeypatch):
    """Records every connect and open; a connect also fails the request outright."""
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


def test_annotations_naming_urls_paths_and_pt_files_touch_nothing(fitted, crafted_pt, trap, capsys):
    scorer = P90Scorer(fitted)
    args = json.loads((FIXTURES / "extender_args_nodes.json").read_text())
    trap["open"].clear()  # the fixture itself
    for ref in attacker_refs(crafted_pt):
        annotations = args["Pod"]["metadata"]["annotations"]
        annotations["hetsched.io/model"] = ref
        annotations["hetsched.io/p90-slo-ms"] = "0.001"  # would filter every node if predicted
        scores = handle_prioritize(scorer, args)
        assert {h["Score"] for h in scores} == {NEUTRAL_SCORE}, ref
        kept = handle_filter(scorer, args)
        assert len(kept["Nodes"]["items"]) == 4 and kept["FailedNodes"] == {}, ref
    assert trap["connect"] == [] and trap["urlopen"] == []
    catalogue = str(resources.files("hetsched.tail").joinpath(DEFAULT_CATALOG_RESOURCE))
    assert set(trap["open"]) <= {catalogue}  # the catalogue, read once at most, and nothing else
    assert MARKER not in capsys.readouterr().out
