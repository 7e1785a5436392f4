"""The link between Slim servers: what moving an activation to another host costs.

A request whose input activation lives on another host (or still at the router's host, for an
image entering segment 1) crosses the network before its server can queue it (ARCHITECTURE.md
"Request lifecycle"): it costs ``bytes / bandwidth + latency``. On a *shared medium* (Wi-Fi, the
paper's 802.11ac WLAN) one transfer occupies the channel at a time, so transfers serialise: a
transfer starts when the previous one has left the channel. A switched network (Ethernet) gives
each transfer the full bandwidth. Bytes per image come from the model's cost table
(:class:`~hetsched.slim.model.costs.SegmentCostTable`: the input activation of (segment, previous
width)), never from a guess.
"""

from __future__ import annotations

from pydantic import Field

from hetsched.core.config import StrictModel
from hetsched.core.errors import UnknownNameError
from hetsched.core.events import Clock
from hetsched.slim.model.costs import SegmentCostTable


class LinkConfig(StrictModel, use_attribute_docstrings=True):
    """One network between the servers (and the router's host)."""

    bandwidth_bytes_per_s: float = Field(gt=0)
    """Goodput of one transfer (what an application reaches, not the PHY rate)."""
    latency_s: float = Field(ge=0)
    """One-way latency added to every transfer."""
    shared_medium: bool = True
    """Transfers serialise on one channel (Wi-Fi); False: each gets the full bandwidth."""


LINK_PRESETS: dict[str, LinkConfig] = {
    # 802.11ac in practice: ~300 Mbit/s of goodput, a few milliseconds (ARCHITECTURE.md).
    "wifi5": LinkConfig(bandwidth_bytes_per_s=300e6 / 8, latency_s=0.003),
    # Switched Ethernet: ~94 % of the line rate as TCP goodput, sub-millisecond latency.
    "ethernet-1g": LinkConfig(
        bandwidth_bytes_per_s=0.94e9 / 8, latency_s=0.0002, shared_medium=False
    ),
    "ethernet-10g": LinkConfig(
        bandwidth_bytes_per_s=9.4e9 / 8, latency_s=0.00005, shared_medium=False
    ),
    # Servers on one host: a memory copy through the kernel.
    "loopback": LinkConfig(bandwidth_bytes_per_s=5e9, latency_s=0.00001, shared_medium=False),
}


def link_config(preset: str) -> LinkConfig:
    """A preset by name.

    Raises:
        UnknownNameError: Naming the preset and listing the known ones.
    """
    if preset not in LINK_PRESETS:
        raise UnknownNameError(
            f"link: unknown preset {preset!r}; known: {', '.join(sorted(LINK_PRESETS))}"
        )
    return LINK_PRESETS[preset]


class Link:
    """The network of one cluster: transfer times on the cluster's clock.

    Args:
        clock: The cluster's clock (a shared medium remembers when it is free again).
        config: Bandwidth, latency, shared or switched.
        costs: Bytes of each segment's input activation.
    """

    def __init__(self, clock: Clock, config: LinkConfig, costs: SegmentCostTable) -> None:
        self.clock = clock
        self.config = config
        self._input_bytes = {
            (c.segment, c.prev_width): c.input_bytes_per_image for c in costs.entries()
        }
        self._free_s = 0.0

    def input_bytes(self, segment: int, prev_width: float | None) -> int:
        """Bytes of the activation a request needs before ``segment`` (the image for segment 0)."""
        return self._input_bytes[(segment, 1.0 if prev_width is None else float(prev_width))]

    def estimate_s(
        self, segment: int, prev_width: float | None, source: int | None, target: int
    ) -> float:
        """What :meth:`transfer_time` would return now, without booking a shared channel (the
        router's prediction)."""
        if source == target:
            return 0.0
        wire_s = self.input_bytes(segment, prev_width) / self.config.bandwidth_bytes_per_s
        if not self.config.shared_medium:
            return wire_s + self.config.latency_s
        wait_s = self._free_s - self.clock.now_s()
        return (wait_s if wait_s > 0.0 else 0.0) + wire_s + self.config.latency_s

    def transfer_time(
        self, segment: int, prev_width: float | None, source: int | None, target: int
    ) -> float:
        """Seconds until the input of ``segment`` arrives at ``target``; 0 on the same host.

        On a shared medium this books the channel: call it once per transfer, when it starts.
        """
        if source == target:
            return 0.0
        wire_s = self.input_bytes(segment, prev_width) / self.config.bandwidth_bytes_per_s
        if not self.config.shared_medium:
            return wire_s + self.config.latency_s
        now_s = self.clock.now_s()
        self._free_s = max(now_s, self._free_s) + wire_s
        return self._free_s - now_s + self.config.latency_s
