"""What the adapter left out of Slurm's output, counted once per job or node and warned once.

Why: a record skipped or a comment ignored must be visible (an operator needs to know that a
user's job is being scheduled by its time limit, or not managed at all) without one hostile job
flooding the log at every scan. The tally keeps the labels it has seen, logs the first sighting of
each at WARNING with an ASCII-only, shortened reason, and gives the totals the CLI prints.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from hetsched.jobs.slurm.json_fields import loggable

log = logging.getLogger("hetsched.jobs.slurm")


@dataclass
class UntrustedTally:
    """Distinct skipped records and ignored requested-time comments seen so far.

    Attributes:
        skipped_records: Labels (``job N``, ``node X``, ``record #i``) of records skipped.
        ignored_comments: Job ids whose ``hetsched:requested_s=`` claim was refused.
    """

    skipped_records: set[str] = field(default_factory=set)
    ignored_comments: set[int] = field(default_factory=set)

    def note_skipped(self, skipped: dict[str, str]) -> None:
        """Counts skipped records; warns at the first sighting of each."""
        for label, reason in skipped.items():
            if label not in self.skipped_records:
                self.skipped_records.add(label)
                log.warning("skipping %s: %s", loggable(label), loggable(reason, 200))

    def note_comments(self, bad_comments: dict[int, str]) -> None:
        """Counts refused requested-time claims; warns at the first sighting of each job."""
        for job_id, reason in bad_comments.items():
            if job_id not in self.ignored_comments:
                self.ignored_comments.add(job_id)
                log.warning(
                    "job %d: ignoring its hetsched:requested_s comment (%s); using its time limit",
                    job_id,
                    loggable(reason, 200),
                )

    def summary(self) -> str:
        """One line for the end of a run (empty when nothing was left out)."""
        parts = []
        if self.skipped_records:
            parts.append(f"{len(self.skipped_records)} malformed records skipped")
        if self.ignored_comments:
            parts.append(f"{len(self.ignored_comments)} requested-time comments ignored")
        return ", ".join(parts)
