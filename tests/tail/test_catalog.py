"""The model-feature catalogue: strict schema, the shipped zoo catalogue, key checks, builder."""

from __future__ import annotations

import json

import pytest

from hetsched.core.errors import DataError, HetschedError
from hetsched.tail.catalog import (
    ModelCatalog,
    default_catalog,
    is_model_key,
    load_catalog,
    save_catalog,
)
from hetsched.tail.catalog_build import build_catalog, parse_source
from hetsched.tail.models import (
    UnknownModelError,
    features_for_annotations,
    manifest_model_ref,
    resolve_model_features,
)
from hetsched.tail.zoo import MODELS
from tests.tail.onnx_model import write_tiny_onnx


def test_shipped_catalogue_is_the_zoo_counted_now():
    """The package data must equal a fresh count of the zoo (regenerate it when this fails:
    `hetsched tail catalog --out src/hetsched/tail/data/model_catalog.json`)."""
    shipped = default_catalog()
    assert shipped.model_keys() == MODELS.names()
    assert build_catalog(MODELS.names()).models == shipped.models
    assert resolve_model_features("resnet50").size_mb == pytest.approx(97.66, abs=0.1)


def test_catalogue_round_trip_and_onnx_source(tmp_path):
    onnx_path = tmp_path / "tiny.onnx"
    write_tiny_onnx(onnx_path)
    catalog = build_catalog(["cnn-s", f"my-net={onnx_path}", str(onnx_path)])
    assert catalog.model_keys() == ["cnn-s", "my-net", "tiny"]
    entry = catalog.models["my-net"]
    assert entry.conv_flops == 2 * 4 * 8 * 9 * 64 // 2 and entry.parameters == 8 * 2 * 9 + 40
    assert entry.input_shape == (1, 4, 8, 8) and entry.source == "onnx:tiny.onnx"
    path = tmp_path / "catalog.json"
    save_catalog(catalog, path)
    assert load_catalog(path) == catalog


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["models"]["cnn-s"].update(flops=1), "sum of its parts"),
        (lambda d: d["models"]["cnn-s"].update(flops="22558016"), "valid integer"),
        (lambda d: d["models"]["cnn-s"].update(extra=1), "Extra inputs"),
        (lambda d: d["models"].update({"../x": d["models"]["cnn-s"]}), "not catalogue keys"),
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d["models"]["cnn-s"].update(input_shape=[1, 0]), "non-positive"),
    ],
)
def test_catalogue_schema_is_strict(tmp_path, edit, message):
    document = json.loads(default_catalog().model_dump_json())
    edit(document)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DataError, match=message):
        load_catalog(path)


def test_missing_or_junk_catalogue_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_catalog(tmp_path / "absent.json")
    (tmp_path / "junk.json").write_bytes(b"\xff{")
    with pytest.raises(DataError, match="not a model catalogue"):
        load_catalog(tmp_path / "junk.json")


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("resnet50", True),
        ("cnn-s", True),
        ("a.b_c-9", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("ResNet50", False),
        ("http://evil/x.pt", False),
        ("file:///etc/passwd", False),
        ("/abs/path.pt", False),
        ("../up", False),
        ("-lead", False),
        ("m\n", False),
    ],
)
def test_model_key_shape(key, ok):
    assert is_model_key(key) is ok


def test_annotations_resolve_only_catalogue_keys():
    catalog = default_catalog()
    assert features_for_annotations({"hetsched.io/model": "cnn-s"}, catalog).name == "cnn-s"
    cases = [
        ({}, "missing"),
        ({"hetsched.io/model": "https://example.com/m.pt"}, "invalid"),
        ({"hetsched.io/model": ["cnn-s"]}, "invalid"),
        ({"hetsched.io/model": "no-such-model"}, "unknown"),
        ({"hetsched.io/model": "cnn-s", "hetsched.io/input-shape": "1,3,32,32"}, "shape"),
        ({"hetsched.io/model": "cnn-s", "hetsched.io/input-shape": "x"}, "shape"),
    ]
    for given, reason in cases:
        with pytest.raises(UnknownModelError) as caught:
            features_for_annotations(given, catalog)
        assert caught.value.reason == reason
    shape_ok = {"hetsched.io/model": "cnn-s", "hetsched.io/input-shape": "1,3,64,64"}
    assert features_for_annotations(shape_ok, catalog).flops > 0
    pod = {"metadata": {"annotations": shape_ok}}
    assert manifest_model_ref(pod) == ("cnn-s", (1, 3, 64, 64))


def test_builder_refuses_what_is_not_trusted_input(tmp_path):
    with pytest.raises(HetschedError, match="neither a zoo name"):
        parse_source("model.pt")
    with pytest.raises(HetschedError, match="bad catalogue key"):
        parse_source("Bad Key=m.onnx")
    with pytest.raises(DataError, match="no such ONNX file"):
        build_catalog([str(tmp_path / "absent.onnx")])
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(DataError, match="ONNX"):
        build_catalog([str(junk)])
    with pytest.raises(HetschedError, match="given twice"):
        build_catalog(["cnn-s", "cnn-s"])
    assert isinstance(build_catalog([]), ModelCatalog)
