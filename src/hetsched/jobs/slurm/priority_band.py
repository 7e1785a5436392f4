"""Where the adapter's priorities go, read from what the controller's own plugin hands out.

Why: a fixed range is wrong for one of Slurm's two plugins. Under ``priority/basic`` (Slurm's
default, FIFO) a new job gets ``0xFFFF0000 - 1 = 4,294,901,759`` and each later one a value one
lower (checked on 22.05), so managed jobs at a fixed 1,000,000 would sit *below* every job the
adapter does not manage. Under ``priority/multifactor`` a job gets at most the sum of the
``PriorityWeight*`` settings. The rule here: the jobs the adapter manages are ordered by the
policy and placed just *above* the highest priority Slurm's plugin can give by itself and above
any pending job the adapter does not manage (section 3.1.2: the agent's priorities "are applied
directly to Slurm", so they must decide which managed job starts first). Unmanaged jobs keep
Slurm's own order after them; with ``--user`` that puts that user's jobs ahead of the others',
so give hetsched a partition of its own (``--partition``) where that matters.

How a restore works also depends on the plugin: multifactor recomputes a released job's value
(``scontrol release``), basic hands a released job a *new* lowest value, sending it to the back
of the FIFO queue (checked on 22.05), so under basic the original number is written back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hetsched.jobs.slurm.priorities import SLURM_MAX_PRIORITY, PriorityRange

log = logging.getLogger("hetsched.jobs.slurm")

#: The first job's priority under priority/basic; later jobs get one less each.
BASIC_TOP_PRIORITY = 0xFFFF0000 - 1
#: Multifactor's weights whose sum bounds the priority it computes (plus the TRES weights).
MULTIFACTOR_WEIGHTS = (
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairShare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
)
#: Fewest distinct ranks the band must hold (priority/basic leaves 65,533 values above its own).
MIN_RANKS = 4096
#: Ranks the band is sized for when there is room (deeper ranks share the floor priority).
BAND_RANKS = 10_000


def parse_show_config(text: str) -> dict[str, str]:
    """``scontrol show config``'s ``Key = Value`` lines as a dict (first occurrence wins)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config.setdefault(key.strip(), value.strip())
    return config


@dataclass(frozen=True)
class PriorityPlugin:
    """What the controller's priority plugin does on its own.

    Attributes:
        priority_type: ``PriorityType`` (``priority/basic``, ``priority/multifactor``, ...).
        ceiling: Highest priority the plugin gives by itself (None: unknown, e.g. a site factor
            plugin or another priority plugin).
    """

    priority_type: str
    ceiling: int | None

    @property
    def restores_by_release(self) -> bool:
        """Whether ``scontrol release`` gives a job back the value the plugin means for it."""
        return self.priority_type == "priority/multifactor"


def _weight(text: str) -> int | None:
    if text in ("", "(null)"):
        return 0
    return int(text) if text.isascii() and text.isdigit() else None


def priority_plugin(config: dict[str, str]) -> PriorityPlugin:
    """The plugin named in ``config`` and the ceiling of the values it hands out."""
    kind = config.get("PriorityType", "")
    if kind == "priority/basic":
        return PriorityPlugin(kind, BASIC_TOP_PRIORITY)
    if kind != "priority/multifactor" or config.get("PrioritySiteFactorPlugin", "(null)") not in (
        "(null)",
        "",
        "site_factor/none",
    ):
        return PriorityPlugin(kind, None)
    weights = [_weight(config.get(name, "")) for name in MULTIFACTOR_WEIGHTS]
    tres = config.get("PriorityWeightTRES", "(null)")
    if tres not in ("(null)", ""):
        weights += [_weight(item.partition("=")[2]) for item in tres.split(",")]
    if any(w is None for w in weights):
        return PriorityPlugin(kind, None)
    return PriorityPlugin(kind, sum(w for w in weights if w is not None))


def managed_range(plugin: PriorityPlugin, highest_unmanaged: int, step: int) -> PriorityRange:
    """The band just above ``plugin.ceiling`` and ``highest_unmanaged`` (the highest priority of
    a pending job the adapter does not manage, 0 for none), ``step`` apart, shrunk so that it
    holds at least :data:`MIN_RANKS` ranks below :data:`SLURM_MAX_PRIORITY`."""
    floor = max(plugin.ceiling or 0, highest_unmanaged)
    if plugin.ceiling is None:
        log.warning(
            "%s: the highest priority it can give is unknown; placing managed jobs above the"
            " highest pending priority seen (%d)",
            plugin.priority_type or "unknown priority plugin",
            floor,
        )
    bottom = floor + 1
    if bottom > SLURM_MAX_PRIORITY - MIN_RANKS + 1:
        bottom = SLURM_MAX_PRIORITY - MIN_RANKS + 1
        log.warning(
            "pending priorities reach %d: managed jobs cannot all be placed above them", floor
        )
    room = SLURM_MAX_PRIORITY - bottom
    if room // step + 1 < MIN_RANKS:
        step = max(1, room // MIN_RANKS)
    top = min(SLURM_MAX_PRIORITY, bottom + step * (BAND_RANKS - 1))
    return PriorityRange(top=top, step=step, bottom=bottom)
