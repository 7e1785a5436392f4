"""Router specs: a registered rule with numeric settings, ``backlog-width(threshold_s=0.012)``.

Why: the learned router's advisors, its teachers and the experiment's ``--routers`` name rules
by their registry name, and a rule's settings (a threshold, a width) were fixed by its
registered defaults, so a frontier point of a rule family (RESULTS, "the bursty-3x frontier")
could be neither an advisor nor a baseline without registering one class per point. A spec
names the rule and overrides some of its constructor's numeric arguments.

Specs arrive from CLI flags and from a learned router's checkpoint, so they are parsed, never
evaluated: a registered name, then optionally ``(key=number, ...)`` with keys the rule's
constructor takes (never ``seed``, which the caller owns) and finite decimal numbers only, so
a spec cannot name a file, a URL or code.
"""

from __future__ import annotations

import inspect
import math
import re

from hetsched.core.errors import ConfigError
from hetsched.slim.routers.base import ROUTERS, Router

MAX_SPEC_CHARS = 200
"""Longest spec accepted (a name and a few settings fit in far less)."""

_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\((.*)\))?$")
_SETTING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([-+0-9.eE]+)$")


def parse_router_spec(spec: str) -> tuple[str, dict[str, float | int]]:
    """The registered name and the settings of ``spec``.

    Raises:
        ConfigError: A malformed spec, a setting the rule's constructor does not take (or
            ``seed``), a value that is not a finite number, or a fraction for a whole-number
            setting; the message names the spec.
        UnknownNameError: An unknown rule name (the message lists the known ones).
    """
    text = spec.strip()
    match = _SPEC.match(text) if len(text) <= MAX_SPEC_CHARS else None
    if match is None:
        raise ConfigError(
            f"router {spec[:MAX_SPEC_CHARS]!r}: expected NAME or NAME(key=number, ...)"
        )
    name, body = match.group(1), match.group(2)
    parameters = inspect.signature(ROUTERS.get(name)).parameters
    settings: dict[str, float | int] = {}
    for item in [] if body is None or not body.strip() else body.split(","):
        setting = _SETTING.match(item.strip())
        if setting is None:
            raise ConfigError(f"router {text!r}: expected key=number, not {item.strip()!r}")
        key, raw = setting.groups()
        if key == "seed" or key not in parameters or key in settings:
            takes = ", ".join(p for p in parameters if p != "seed")
            raise ConfigError(f"router {text!r}: {key!r} is not a setting of {name} ({takes})")
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"router {text!r}: {key}={raw} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"router {text!r}: {key}={raw} is not finite")
        if isinstance(parameters[key].default, int) or parameters[key].annotation in (
            "int",
            "int | None",
        ):
            if not value.is_integer():
                raise ConfigError(f"router {text!r}: {key} takes a whole number, not {raw}")
            settings[key] = int(value)
        else:
            settings[key] = value
    return name, settings


def create_router(spec: str, seed: int = 0) -> Router:
    """A fresh router of ``spec`` seeded with ``seed`` (see :func:`parse_router_spec`).

    Raises:
        ConfigError: A malformed spec or settings the rule refuses (its own checks).
        UnknownNameError: An unknown rule name.
    """
    name, settings = parse_router_spec(spec)
    router: Router = ROUTERS.create(name, seed=seed, **settings)
    return router
