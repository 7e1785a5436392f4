"""A name -> class registry, so configs and CLI flags can name policies, routers and devices.

Each decision point (router, job policy, regressor, ...) owns one :class:`Registry`. Looking up an
unknown name raises :class:`~hetsched.core.errors.UnknownNameError` that lists the known names, so a
typo in a config or flag is reported instead of silently falling back to a default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from hetsched.core.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to classes (or factories) of one kind.

    Args:
        kind: What the registry holds, used in error messages (e.g. ``"router"``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator that registers the class under ``name``.

        Raises:
            ValueError: If ``name`` is already taken (two classes must not share a name).
        """

        def decorator(obj: T) -> T:
            key = name.lower()
            if key in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[key] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        """Returns the entry registered as ``name`` (case-insensitive).

        Raises:
            UnknownNameError: If no entry has that name; the message lists the known names.
        """
        try:
            return self._entries[name.lower()]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def create(self, name: str, **kwargs: Any) -> Any:
        """Instantiates the entry registered as ``name`` with ``kwargs``."""
        factory: Any = self.get(name)
        return factory(**kwargs)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
