"""The adapter's OverSubscribe changes (section 3.1.2: "allocation flexibility is managed through
Slurm's oversubscribe flag as per the solver's guidance"), made only where they can be undone
exactly.

What Slurm 22.05 allows (checked live): ``squeue --json`` prints a job's OverSubscribe as
``shared`` = null (OK, the default), ``"none"`` (NO, ``--exclusive``), ``"shared"`` (YES,
``--oversubscribe``), ``"user"`` or ``"mcs"``; ``scontrol update jobid=N oversubscribe=`` accepts
only ``yes`` and ``no`` (any number but 0 also means yes). So OK, USER and MCS, once changed,
can never be written back. Hence the rule: the adapter isolates (sets NO) only a job that is at
YES — its owner let Slurm share its nodes, so the adapter may decide — remembers that original
value, and writes exactly it back when the placer later packs the job or on restore. A job at OK,
USER or MCS is never touched (logged once), and NO is the user's own choice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from hetsched.jobs.slurm.priorities import Advice
from hetsched.jobs.slurm.records import SlurmJob

log = logging.getLogger("hetsched.jobs.slurm")

#: ``squeue --json``'s ``shared`` -> the name ``scontrol show job`` prints.
OVERSUBSCRIBE_NAMES: dict[str | None, str] = {
    None: "OK",
    "none": "NO",
    "shared": "YES",
    "user": "USER",
    "mcs": "MCS",
}
#: ``shared`` values ``scontrol update oversubscribe=`` can write back, and the word that does.
WRITABLE: dict[str | None, str] = {"shared": "yes", "none": "no"}


def oversubscribe_name(shared: str | None) -> str:
    """How ``scontrol show job`` names a ``shared`` value."""
    return OVERSUBSCRIBE_NAMES.get(shared, str(shared).upper())


@dataclass
class OversubscribeLedger:
    """The original OverSubscribe of every job the adapter changed, for exact write-back.

    Attributes:
        originals: Job id -> ``shared`` as first seen, for jobs the adapter set to NO.
    """

    originals: dict[int, str | None] = field(default_factory=dict)
    _noted_unwritable: set[int] = field(default_factory=set)

    def wanted(self, job: SlurmJob, advice: Advice | None) -> str | None:
        """The ``scontrol`` word to write for the placer's ``advice`` (None: leave the job)."""
        if advice is Advice.EXCLUSIVE and job.shared != "none":
            if job.shared not in WRITABLE:
                self._note_unwritable(job)
                return None
            self.originals.setdefault(job.job_id, job.shared)
            return "no"
        if advice is Advice.SHARED and job.job_id in self.originals:
            original = self.originals[job.job_id]
            return None if job.shared == original else WRITABLE[original]
        return None

    def restorations(self, current: dict[int, SlurmJob]) -> list[tuple[SlurmJob, str]]:
        """(job, word) for every changed job that still waits and differs from its original."""
        pairs = []
        for job_id, original in sorted(self.originals.items()):
            job = current.get(job_id)
            if job is not None and job.pending and job.shared != original:
                pairs.append((job, WRITABLE[original]))
        return pairs

    def forget(self, job_id: int) -> None:
        """Drops a job that left the queue."""
        self.originals.pop(job_id, None)

    def _note_unwritable(self, job: SlurmJob) -> None:
        if job.job_id not in self._noted_unwritable:
            self._noted_unwritable.add(job.job_id)
            log.info(
                "job %d: placer would isolate it, left as is: OverSubscribe=%s cannot be written"
                " back by scontrol (submit with --oversubscribe to let hetsched decide)",
                job.job_id,
                oversubscribe_name(job.shared),
            )
