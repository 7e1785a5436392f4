import math

import numpy as np
import pytest
from pydantic import Field

from hetsched.core.config import StrictModel, load_config, validate_config
from hetsched.core.errors import ConfigError, DataError, UnknownNameError
from hetsched.core.metrics import summarize
from hetsched.core.registry import Registry
from hetsched.core.seeding import make_rng, seed_everything


def test_summary_matches_numpy():
    values = np.arange(1, 101, dtype=float)
    s = summarize(values)
    assert s.count == 100
    assert s.mean == pytest.approx(50.5)
    assert s.std == pytest.approx(values.std())
    assert s.p50 == pytest.approx(50.5)
    assert s.p90 == pytest.approx(np.percentile(values, 90))
    assert s.p99 == pytest.approx(np.percentile(values, 99))
    assert (s.min, s.max) == (1.0, 100.0)


def test_empty_summary_is_nan_not_zero():
    s = summarize([])
    assert s.count == 0
    assert math.isnan(s.mean) and math.isnan(s.p99)


def test_registry_rejects_unknown_and_duplicate_names():
    reg: Registry[type] = Registry("router")

    @reg.register("Random")
    class RandomRouter:
        def __init__(self, seed: int = 0):
            self.seed = seed

    assert reg.get("random") is RandomRouter
    assert reg.create("RANDOM", seed=3).seed == 3
    assert "random" in reg and reg.names() == ["random"]
    with pytest.raises(UnknownNameError, match="unknown router 'rnadom'; known: random"):
        reg.get("rnadom")
    with pytest.raises(ValueError, match="already registered"):
        reg.register("random")(RandomRouter)


class _Knobs(StrictModel):
    batch_max: int = Field(8, gt=0)
    name: str = "x"


def test_config_errors_name_the_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("batch_max: -1\n")
    with pytest.raises(ConfigError, match=r"c.yaml: field 'batch_max'"):
        load_config(path, _Knobs)
    path.write_text("batch_mx: 3\n")
    with pytest.raises(ConfigError, match="batch_mx"):
        load_config(path, _Knobs)
    path.write_text("batch_max: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path, _Knobs)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml", _Knobs)
    with pytest.raises(ConfigError, match="mapping"):
        validate_config([1, 2], _Knobs)
    path.write_text("batch_max: 4\n")
    assert load_config(path, _Knobs).batch_max == 4


def test_data_error_names_file_line_and_field():
    err = DataError("not a number", path="t.csv", line=7, field="run_time")
    assert str(err) == "t.csv:7: not a number (field 'run_time')"


def test_seeding_is_reproducible():
    assert make_rng(5).random() == make_rng(5).random()
    seed_everything(3)
    a = np.random.rand()
    seed_everything(3)
    assert np.random.rand() == a
