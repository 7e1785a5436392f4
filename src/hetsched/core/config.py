"""Config loading: YAML (or a dict) validated into pydantic models, errors naming the bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from hetsched.core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors (a misspelt knob must fail)."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


def _format_validation_error(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item["loc"]) or "<root>"
        lines.append(f"{source}: field '{loc}': {item['msg']}")
    return "\n".join(lines)


def validate_config(data: Any, model: type[M], source: str = "<config>") -> M:
    """Validates ``data`` (a mapping) into ``model``.

    Raises:
        ConfigError: Naming ``source`` and every bad field.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error, source)) from None


def load_config(path: str | Path, model: type[M]) -> M:
    """Reads the YAML file at ``path`` and validates it into ``model``.

    Raises:
        ConfigError: If the file is missing, is not valid YAML, or has a bad field.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    return validate_config(data, model, source=str(path))
