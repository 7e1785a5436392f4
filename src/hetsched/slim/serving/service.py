"""What the HTTP layer needs from a serving system: its config, metrics, front and input spec.

:class:`~.runtime.ServingRuntime` (Ray actors) is the one used in production; tests put a front
over a fake pool behind the same API, which is why the app is written against this protocol.
"""

from __future__ import annotations

from typing import Protocol

from hetsched.slim.serving.config import ServeConfig
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import InputSpec
from hetsched.slim.serving.metrics import ServingMetrics


class Service(Protocol):
    """A serving system the HTTP app can start, stop and send images to."""

    config: ServeConfig
    metrics: ServingMetrics
    front: Front | None
    """None until :meth:`start` has brought the servers up."""

    @property
    def input_spec(self) -> InputSpec | None:
        """The model's input shape and normalisation; None until started (read-only here, so a
        service that knows it from the start may declare it as a plain ``InputSpec``)."""

    async def start(self) -> None:
        """Brings the servers and the routing loop up."""

    async def stop(self) -> None:
        """Answers what is queued and takes everything down."""
