"""What one scan of the live loop saw and did (the adapter's log, as data)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Change:
    """One planned or applied change.

    Attributes:
        job_id: The job.
        what: ``priority``, ``oversubscribe``, ``restore-priority`` or ``restore-oversubscribe``.
        old: Value before.
        new: Value wanted.
        outcome: ``applied``, ``dry-run``, ``vanished`` or ``failed: <message>``.
    """

    job_id: int
    what: str
    old: object
    new: object
    outcome: str


@dataclass
class ScanReport:
    """What one scan saw and did.

    Attributes:
        time_s: Unix time of the scan.
        pending: Managed pending jobs (not held).
        running: Managed running jobs.
        changes: Changes planned or applied.
        finished: Jobs seen running before that run no more.
        skipped_records: Malformed job and node records left out of this scan.
        ignored_comments: Requested-time comments refused in this scan.
        error: Why the scan failed (None when it did not).
    """

    time_s: float
    pending: int = 0
    running: int = 0
    changes: list[Change] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    skipped_records: int = 0
    ignored_comments: int = 0
    error: str | None = None

    @property
    def failures(self) -> list[Change]:
        """Changes that failed after their retries."""
        return [c for c in self.changes if c.outcome.startswith("failed")]
