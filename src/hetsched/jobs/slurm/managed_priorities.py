"""The priorities of the jobs the adapter manages: where they go and how they go back.

Why a class: the band they go into depends on the controller's priority plugin and on the
pending jobs the adapter does not manage (see :mod:`.priority_band`); it is fixed at the first
scan that needs it, so a job keeps its priority while its rank does not move (no ``scontrol``
churn). Giving a job back also depends on the plugin: ``scontrol release`` under multifactor,
the original number written back under basic (where a release sends the job to the back of the
queue). Every job's first-seen priority is kept for that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hetsched.jobs.slurm.client import SlurmClient
from hetsched.jobs.slurm.json_fields import loggable
from hetsched.jobs.slurm.priorities import PriorityRange
from hetsched.jobs.slurm.priority_band import (
    PriorityPlugin,
    managed_range,
    parse_show_config,
    priority_plugin,
)
from hetsched.jobs.slurm.records import highest_pending_priority

log = logging.getLogger("hetsched.jobs.slurm")


class ManagedPriorities:
    """The managed band and the original priorities of the jobs the adapter changed.

    Args:
        client: The Slurm client (reads ``scontrol show config``, issues the restores).
        explicit_range: A range set by the operator (None: the band above Slurm's own values).
        step: Gap between ranks in the automatic band.
    """

    def __init__(
        self, client: SlurmClient, explicit_range: PriorityRange | None, step: int
    ) -> None:
        self.client = client
        self.plugin: PriorityPlugin | None = None
        self.range: PriorityRange | None = explicit_range
        self.step = step
        self.originals: dict[int, int] = {}
        self._warned_above: set[str] = set()

    def learn_plugin(self) -> PriorityPlugin:
        """Reads the controller's priority plugin once (``scontrol show config``).

        Raises:
            SlurmCommandError: If the controller does not answer.
        """
        if self.plugin is None:
            self.plugin = priority_plugin(parse_show_config(self.client.show_config()))
            ceiling = self.plugin.ceiling
            log.info(
                "%s hands out priorities up to %s",
                self.plugin.priority_type or "unknown priority plugin",
                "an unknown value" if ceiling is None else ceiling,
            )
            if self.range is not None and ceiling is not None and self.range.top <= ceiling:
                log.warning(
                    "managed priorities (<= %d) lie inside %s's own range (up to %d): jobs the"
                    " adapter does not manage may start first",
                    self.range.top,
                    self.plugin.priority_type,
                    ceiling,
                )
        return self.plugin

    def band(self, unmanaged_records: list[Any]) -> PriorityRange:
        """The range for this scan: fixed at the first call (above the plugin's ceiling and the
        highest unmanaged pending priority); later, an unmanaged job above it is warned about.

        Raises:
            SlurmCommandError: If the plugin is still unknown and the controller does not answer.
        """
        highest = highest_pending_priority(unmanaged_records)
        if self.range is None:
            plugin = self.learn_plugin()
            self.range = managed_range(plugin, highest[0] if highest else 0, self.step)
            log.info(
                "managed jobs get priorities %d down to %d, %d apart",
                self.range.top,
                self.range.bottom,
                self.range.step,
            )
        elif highest is not None and highest[0] >= self.range.bottom:
            label = highest[1]
            if label not in self._warned_above:
                self._warned_above.add(label)
                log.warning(
                    "%s (not managed) has priority %d, above the managed floor %d: it may start"
                    " before managed jobs",
                    loggable(label),
                    highest[0],
                    self.range.bottom,
                )
        return self.range

    def restore_call(self, job_id: int) -> Callable[[int], None]:
        """How to give ``job_id`` back to Slurm: release it where the plugin recomputes the
        value (multifactor), else write its original priority back (basic, unknown)."""
        plugin = self.plugin
        if plugin is not None and plugin.restores_by_release:
            return self.client.reset_priority
        original = self.originals[job_id]
        return lambda j: self.client.set_priority(j, original)
