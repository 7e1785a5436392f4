"""The live loop of section 3.1.2: scan the queue, score it, apply priorities with ``scontrol``.

Every ``interval_s`` (the paper: one minute) the adapter reads the pending and running jobs and the
nodes, builds the simulator's queue state (:mod:`.snapshot`), lets the policy score the pending
jobs, maps scores to Slurm priorities (:mod:`.priorities`) in a band just above what Slurm's own
priority plugin hands out (:mod:`.priority_band`) and issues ``scontrol update jobid=N
priority=M`` for each job whose priority must change; with a placer it also sets
``oversubscribe=no`` on jobs the placer would isolate, where that can be undone exactly
(:mod:`.oversubscribe`).

Everything Slurm prints is untrusted: the raw records are filtered by partition/user first, then
parsed one by one; a malformed record is skipped, a requested-time comment is read only when
``trust_requested_comment`` is set and then only within its bounds, and both are counted in
:attr:`SlurmAdapter.tally` and warned about once.

Operational rules: only jobs matching the partition/user filter are touched; held jobs (priority 0)
are left alone; a job that finishes or vanishes between scan and update is logged and dropped; a
failing call is retried ``retries`` times, then reported, and the next scan tries again; an error
of a whole scan (``squeue`` down) is logged and the loop goes on, up to ``max_outage_s`` without a
successful scan; :meth:`SlurmAdapter.run` first waits (bounded) for slurmctld to answer
(:mod:`.controller`). ``restore`` hands every touched job that still waits back to Slurm's own
priority and sharing. Every change is logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetsched.core.errors import ConfigError, DataError, HetschedError
from hetsched.jobs.placement.placers import JobRequest, Placer
from hetsched.jobs.policies.queue_state import PriorityPolicy, QueueState
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError
from hetsched.jobs.slurm.controller import SlurmUnreachableError, wait_for_controller
from hetsched.jobs.slurm.managed_priorities import ManagedPriorities
from hetsched.jobs.slurm.oversubscribe import OversubscribeLedger, oversubscribe_name
from hetsched.jobs.slurm.priorities import (
    PriorityRange,
    placement_advice,
    scores_to_priorities,
)
from hetsched.jobs.slurm.records import SlurmJob, parse_jobs, parse_nodes, select_job_records
from hetsched.jobs.slurm.scan_report import Change, ScanReport
from hetsched.jobs.slurm.snapshot import Completion, take_snapshot
from hetsched.jobs.slurm.untrusted_tally import UntrustedTally

log = logging.getLogger("hetsched.jobs.slurm")


@dataclass
class AdapterConfig:
    """Knobs of the live loop.

    Attributes:
        interval_s: Seconds between scans (the paper used 60).
        dry_run: Log the planned changes, apply none.
        partition: Only touch jobs of this partition (None = all); the cluster is its nodes.
        user: Only touch this user's jobs (None = all).
        trust_requested_comment: Read the bounded ``hetsched:requested_s=`` claim of job
            comments (see :mod:`.requested_comment`); off, the time limit is the requested time.
        priority_range: Where managed jobs' priorities go (None: just above what Slurm's own
            priority plugin hands out, see :mod:`.priority_band`).
        priority_step: Gap between ranks in that automatic band.
        placer: Placer for oversubscribe advice (None = no advice).
        advice_top_k: Advise only the K best-ranked pending jobs (the paper's top-K, H = 8-16).
        retries: Extra attempts of a failed ``scontrol`` call within one scan.
        retry_delay_s: Pause before each retry.
        connect_timeout_s: How long :meth:`SlurmAdapter.run` waits for slurmctld at the start.
        max_outage_s: :meth:`SlurmAdapter.run` gives up when no scan succeeded for this long.
    """

    interval_s: float = 60.0
    dry_run: bool = False
    partition: str | None = None
    user: str | None = None
    trust_requested_comment: bool = False
    priority_range: PriorityRange | None = None
    priority_step: int = 100
    placer: Placer | None = None
    advice_top_k: int = 8
    retries: int = 2
    retry_delay_s: float = 0.5
    connect_timeout_s: float = 30.0
    max_outage_s: float = 300.0

    def __post_init__(self) -> None:
        if self.priority_step < 1:
            raise ConfigError(f"priority step must be >= 1, got {self.priority_step}")


class SlurmAdapter:
    """Drives one Slurm cluster's priorities with a :class:`PriorityPolicy`.

    Args:
        client: The Slurm client.
        policy: Any registered priority policy (or a loaded checkpoint's policy).
        config: Loop settings.
        clock: Unix time source (the live mechanism's clock; the policy reads the snapshot's).
        sleep: Pause used between retries.
    """

    def __init__(
        self,
        client: SlurmClient,
        policy: PriorityPolicy,
        config: AdapterConfig | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.policy = policy
        self.config = config or AdapterConfig()
        self._clock = clock
        self._sleep = sleep
        self._origin_s: float | None = None
        self._priorities = ManagedPriorities(
            client, self.config.priority_range, self.config.priority_step
        )
        self._oversubscribe = OversubscribeLedger()
        self._running: dict[int, SlurmJob] = {}
        self._completions: list[Completion] = []
        self.tally = UntrustedTally()

    @property
    def priority_range(self) -> PriorityRange | None:
        """The band managed jobs' priorities go into (None until a scan needed it)."""
        return self._priorities.range

    # -- one scan ----------------------------------------------------------------------------
    def scan(self) -> ScanReport:
        """Reads the cluster once and applies (or, in dry-run, logs) the changes.

        Errors of the reads are caught and returned in the report, so the loop never stops.
        """
        now = self._clock()
        report = ScanReport(time_s=now)
        config = self.config
        try:
            all_records = self.client.job_records()
            node_records = self.client.node_records()
        except (SlurmCommandError, DataError) as error:
            return self._failed(report, error)
        records = select_job_records(all_records, config.partition, config.user)
        parsed = parse_jobs(records, config.trust_requested_comment)
        parsed_nodes = parse_nodes(node_records)
        self.tally.note_skipped({**parsed.skipped, **parsed_nodes.skipped})
        self.tally.note_comments(parsed.bad_comments)
        report.skipped_records = len(parsed.skipped) + len(parsed_nodes.skipped)
        report.ignored_comments = len(parsed.bad_comments)
        jobs, nodes = parsed.jobs, parsed_nodes.nodes
        report.finished = self._track_completions(jobs, now)
        pending = [j for j in jobs if j.pending and j.priority > 0]
        report.pending = len(pending)
        report.running = sum(j.running for j in jobs)
        if not pending:
            return report
        if self._origin_s is None:
            self._origin_s = min(j.submit_time_s for j in jobs)
        managed = {id(r) for r in records}
        try:
            band = self._priorities.band([r for r in all_records if id(r) not in managed])
            snapshot = take_snapshot(
                pending, nodes, now, self._origin_s, self._completions, config.partition
            )
        except HetschedError as error:
            return self._failed(report, error)
        scores = np.asarray(self.policy.score(snapshot.queue_state), dtype=np.float64)
        priorities = scores_to_priorities(scores, band)
        for job, priority in zip(snapshot.pending, priorities.tolist(), strict=True):
            if job.priority != priority:
                self._priorities.originals.setdefault(job.job_id, job.priority)
                report.changes.append(
                    self._apply(job.job_id, "priority", job.priority, priority, self._set(priority))
                )
        placer = self.config.placer
        if placer is not None:
            report.changes += self._advise(
                snapshot.pending, priorities, snapshot.queue_state, placer
            )
        return report

    @staticmethod
    def _failed(report: ScanReport, error: HetschedError) -> ScanReport:
        report.error = str(error)
        log.error("scan failed, will retry next interval: %s", error)
        return report

    def _set(self, priority: int) -> Callable[[int], None]:
        return lambda job_id: self.client.set_priority(job_id, priority)

    def _track_completions(self, jobs: list[SlurmJob], now: float) -> list[int]:
        """Records jobs seen running before that run no more (fair share and QSSF read them)."""
        by_id = {j.job_id: j for j in jobs}
        finished = []
        for job_id, before in list(self._running.items()):
            after = by_id.get(job_id)
            if after is not None and after.running:
                continue
            end = after.end_time_s if after is not None and after.end_time_s > 0 else now
            run = max(end - before.start_time_s, 0.0)
            self._completions.append(Completion(before.user, before.num_gpus, run, end))
            del self._running[job_id]
            finished.append(job_id)
        for job in jobs:
            if job.running:
                self._running[job.job_id] = job
        return finished

    def _advise(
        self,
        pending: list[SlurmJob],
        priorities: np.ndarray,
        queue_state: QueueState,
        placer: Placer,
    ) -> list[Change]:
        """Oversubscribe advice for the top-K jobs (section 3.1.2, the solver's guidance)."""
        state = queue_state.cluster_state
        every_node = np.ones(len(state.cluster.nodes), dtype=bool)
        order = np.argsort(-priorities, kind="stable")[: self.config.advice_top_k]
        changes = []
        for index in order.tolist():
            job = pending[index]
            request = JobRequest(job.num_gpus, float(job.cpus), 0.0, every_node)
            word = self._oversubscribe.wanted(job, placement_advice(request, state, placer))
            if word is not None:
                changes.append(self._set_oversubscribe(job, word))
        return changes

    def _set_oversubscribe(self, job: SlurmJob, word: str, what: str = "oversubscribe") -> Change:
        return self._apply(
            job.job_id,
            what,
            oversubscribe_name(job.shared),
            word.upper(),
            lambda j: self.client.set_oversubscribe(j, word),
        )

    def _apply(
        self, job_id: int, what: str, old: object, new: object, call: Callable[[int], None]
    ) -> Change:
        """Runs ``call(job_id)`` with retries; never raises."""
        if self.config.dry_run:
            log.info("dry-run: job %d %s %s -> %s (not applied)", job_id, what, old, new)
            return Change(job_id, what, old, new, "dry-run")
        attempts = 1 + max(self.config.retries, 0)
        attempt = 1
        while True:
            try:
                call(job_id)
            except SlurmCommandError as error:
                if error.job_gone:
                    log.info("job %d left the queue before its %s update: %s", job_id, what, error)
                    self._priorities.originals.pop(job_id, None)
                    self._oversubscribe.forget(job_id)
                    return Change(job_id, what, old, new, "vanished")
                log.warning(
                    "job %d %s attempt %d/%d failed: %s", job_id, what, attempt, attempts, error
                )
                if attempt >= attempts:
                    return Change(job_id, what, old, new, f"failed: {error.message}")
                attempt += 1
                self._sleep(self.config.retry_delay_s)
                continue
            log.info("job %d %s %s -> %s", job_id, what, old, new)
            return Change(job_id, what, old, new, "applied")

    # -- restore and the loop ----------------------------------------------------------------
    def restore(self) -> list[Change]:
        """Hands every touched job that still waits back to Slurm's priority and sharing.

        Priorities go back through ``scontrol release`` where the plugin recomputes them
        (multifactor), else the original number is written back (basic, which would otherwise
        send a released job to the back of the queue); jobs the adapter made exclusive get their
        original OverSubscribe back, exactly. Jobs that left the queue are skipped.
        """
        try:
            self._priorities.learn_plugin()
            current = {j.job_id: j for j in self.client.jobs()}
        except (SlurmCommandError, DataError) as error:
            log.error("restore could not read the queue: %s", error)
            return []
        changes = []
        for job_id, original in sorted(self._priorities.originals.items()):
            job = current.get(job_id)
            if job is None or not job.pending or job.priority == 0:
                continue
            call = self._priorities.restore_call(job_id)
            changes.append(self._apply(job_id, "restore-priority", job.priority, original, call))
        for job, word in self._oversubscribe.restorations(current):
            changes.append(self._set_oversubscribe(job, word, "restore-oversubscribe"))
        if not self.config.dry_run:
            self._priorities.originals.clear()
            self._oversubscribe.originals.clear()
        return changes

    def run(
        self,
        max_scans: int | None = None,
        until_idle: bool = False,
        restore: bool = False,
        stop: threading.Event | None = None,
        on_scan: Callable[[ScanReport], None] | None = None,
    ) -> int:
        """Waits (bounded) for slurmctld, then scans every ``interval_s`` until a limit or
        ``stop`` is hit; returns the scan count.

        Args:
            max_scans: Stop after this many scans (None = no limit).
            until_idle: Stop at the first scan that finds no matching pending or running job.
            restore: Call :meth:`restore` on the way out (also on Ctrl-C and on giving up).
            stop: Set it from another thread to end the loop at the next wait.
            on_scan: Called with each scan's report.

        Raises:
            SlurmUnreachableError: If slurmctld does not answer within ``connect_timeout_s`` at
                the start, or no scan succeeds for ``max_outage_s``.
        """
        stop = stop or threading.Event()
        wait_for_controller(self.client, self.config.connect_timeout_s, self._sleep)
        scans = 0
        last_success = self._clock()
        try:
            while True:
                report = self.scan()
                scans += 1
                if on_scan is not None:
                    on_scan(report)
                if report.error is None:
                    last_success = report.time_s
                elif report.time_s - last_success >= self.config.max_outage_s:
                    raise SlurmUnreachableError(
                        f"no successful scan for {report.time_s - last_success:.0f} s"
                        f" (last error: {report.error.splitlines()[0][:300]})"
                    )
                idle = report.error is None and report.pending == 0 and report.running == 0
                if (max_scans is not None and scans >= max_scans) or (until_idle and idle):
                    break
                if stop.wait(self.config.interval_s):
                    break
        finally:
            if restore:
                self.restore()
        return scans
