"""Checks of URLs an operator gives (a load generator's target, a Prometheus to query).

Only ``http`` and ``https`` with a host pass: urllib would also open ``file:`` and other schemes,
and a mistyped URL should be a one-line error when the command starts, not a failure at each
later request.
"""

from __future__ import annotations

import urllib.parse

from hetsched.core.errors import ConfigError


def check_http_url(url: str, option: str) -> None:
    """Raises :class:`~hetsched.core.errors.ConfigError` naming ``option`` unless ``url`` is an
    http(s) URL with a host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{option}: {url!r} is not an http(s) URL with a host")
