"""The greedy segment-slim executor: Algorithm 1 of the Slim Scheduler paper, on one server.

One implementation for both worlds (ARCHITECTURE.md principle 2): it drives an
:class:`~hetsched.slim.executor.backend.ExecutorBackend` (simulated or live) and reads time only
from the clock it is given (anything with ``now_s()`` and ``schedule_in(delay_s, callback)``: the
simulated :class:`~hetsched.core.events.EventLoop` or a real-time loop). The paper's executor is a
thread that loops forever (``LOOP``, ``UNLOADERLOOP``); this one is single-threaded and
event-driven: it runs the loop body whenever something can have changed (a ``submit``, a batch's
end, an unload) and stops when the head of the FIFO cannot run (line 9), so it never spins.
A backend calls a batch's ``done`` later on the clock's thread, never from inside ``run_batch``.

Interpretation of the knobs, where the paper leaves room:

* FIFO: the oldest waiting request is the head; a batch takes up to B_max requests of the
  head's key (segment, w_req, w_prev), oldest first (lines 3-4). A head that cannot run blocks
  everything behind it, as the paper's loop does.
* FINDFREEBESTFIT (lines 5, 11-12): a free instance of the segment with the smallest width
  >= w_req; an instance runs any previous width (its first convolutions keep every input channel).
* Scale-up (lines 6-7, section III.A "instantiating up to N_new additional instances for key k"):
  when no free instance fits, the executor loads one instance of (s, w_req) if none is loaded;
  if some are loaded but busy, it loads up to N_new more only once the head key's queue has
  reached Q_th, otherwise the head waits for a busy instance (that wait is what forms batches).
  Every load passes CANLOAD (lines 13-20): the instance's bytes on top of the device's VRAM in
  use within M_max, and the latest utilisation below U_blk.
* Requeue (line 9): a batch is only taken from the FIFO once an instance is found, so "requeue to
  the front" is "leave it there"; the loop body runs again on the next batch end or unload (or,
  when nothing of this executor runs, after ``blocked_retry_s``: a live device can be busy with
  other work). While the head is blocked, a ``submit`` only enqueues, unless it brings the
  head key's queue to Q_th: no other arrival can change the outcome of lines 5-8.
* UNLOADERLOOP (lines 21-25): one timer at the earliest moment an idle instance reaches t_idle.
* Compute slots (beyond the paper; only for a backend that declares ``batch_slots``, the live
  CPU): a free instance is not a free device. On a CPU that computes one batch per core, a batch
  started while every core is busy only waits for one, and the requests that arrive meanwhile
  cannot join it; so while ``batch_slots`` of this executor's batches run, LOOP stops before
  line 3 (as if the head were blocked) and runs again at the next batch end, when the head key's
  batch takes everything that queued. The simulated device and GPUs (concurrent streams) declare
  no bound, and their behaviour is the paper's. Measured in benchmarks/RESULTS.md ("CPU batches
  formed when a core is free").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import sub
from typing import Any

from hetsched.slim.executor.backend import SegmentKey
from hetsched.slim.executor.greedy_state import GreedyState
from hetsched.slim.executor.queues import Instance, KeyQueue
from hetsched.slim.executor.server import (
    BatchFinished,
    SegmentDone,
    SegmentOutputDone,
)


class GreedyExecutor(GreedyState):
    """Algorithm 1 on one backend; the cluster's
    :class:`~hetsched.slim.executor.server.SegmentServer`.

    Built like :class:`GreedyState` (same arguments and errors); this half holds LOOP and
    UNLOADERLOOP.
    """

    # -- the SegmentServer protocol ---------------------------------------------------------------

    def submit(
        self,
        segment: int,
        width: float,
        prev_width: float | None,
        done: SegmentDone | SegmentOutputDone,
        payload: Any = None,
    ) -> None:
        """Enqueues q(segment, width, now, prev_width) and runs what can run.

        ``done(executed_width)`` is called when the request's batch ends; when a ``payload``
        (an activation) is given, ``done(executed_width, output)`` gets the segment's output.

        Raises:
            ConfigError: If ``width`` is not in W, or one instance of it cannot fit under M_max.
        """
        self._enqueue(
            self._queue(segment, width, prev_width), segment, done, payload, self.clock.now_s()
        )

    def submit_many(
        self,
        segment: int,
        width: float,
        prev_width: float | None,
        payloads: list[Any],
        finished: BatchFinished,
    ) -> None:
        """Enqueues one request of the key per payload, exactly as :meth:`submit` in turn would;
        ``finished(executed_width, outputs)`` reports them once per batch.

        Raises:
            ConfigError: As :meth:`submit`.
        """
        queue = self._queue(segment, width, prev_width)
        self._batch_callbacks.add(finished)
        now_s = self.clock.now_s()
        for payload in payloads:
            if (
                self._order
                or self._paused
                or not self._start_alone(queue, finished, payload, now_s)
            ):
                self._enqueue(queue, segment, finished, payload, now_s)

    def _start_alone(
        self, queue: KeyQueue, done: Callable[..., None], payload: Any, now_s: float
    ) -> bool:
        """With nothing waiting, a request that finds a free instance runs at once (lines 3-5 and
        10 for a batch of one): what :meth:`_enqueue` then :meth:`_dispatch` would do, without
        queueing it first (the usual case below saturation). False (nothing done) when no free
        instance fits or every compute slot is busy: then the request queues and the loop
        decides (scale-up or wait).
        """
        if self._running >= self._batch_slots:
            return False
        for instances in queue.fitting:  # line 5: FINDFREEBESTFIT
            if instances:
                instance = instances.pop()
                break
        else:
            return False
        record = self.record
        record.submitted += 1
        self._start_batch(instance, queue.segment_key, [now_s], [done], [payload], now_s)
        if now_s >= record.next_sample_s:
            record.sample(now_s, self)
        return True

    def _enqueue(
        self, queue: KeyQueue, segment: int, done: Callable[..., None], payload: Any, now_s: float
    ) -> None:
        """Appends one request to its key's queue and the FIFO order, then runs what can run."""
        queue.enqueued_s.append(now_s)
        queue.dones.append(done)
        queue.payloads.append(payload)
        self._order.append(queue)
        self._queued += 1
        self._telemetry = None
        self._queued_by_segment[segment] += 1
        self.record.submitted += 1
        # While the head is blocked (line 9) only two things can unblock it: a change on the
        # device (batch end, unload: they run the loop anyway) or the head key's queue reaching
        # Q_th (the scale trigger). Any other arrival would find the same head blocked again.
        blocked = self._blocked
        if blocked is None or (
            queue is blocked and len(queue.dones) == self._scale_queue_threshold
        ):
            self._dispatch(now_s)

    def pause(self) -> None:
        """The server is down: no batch starts until :meth:`resume` (running ones finish and
        requests keep queueing)."""
        self._paused = True

    def resume(self) -> None:
        """The server is back: run what waits."""
        self._paused = False
        self._dispatch(self.clock.now_s())

    # -- Algorithm 1 --------------------------------------------------------------------------

    def _dispatch(self, now_s: float) -> None:
        """LOOP (lines 1-10), run to the first head that cannot run."""
        if self._paused:
            return
        order = self._order
        self._blocked = None
        instance: Instance | None
        batch_slots = self._batch_slots
        while order:
            if self._running >= batch_slots:  # every compute slot busy: form the batch later
                break
            queue = order[0]  # line 3: peek the head key
            if queue.departed:  # that request already left in an earlier batch of its key
                queue.departed -= 1
                order.popleft()
                continue
            for instances in queue.fitting:  # line 5: FINDFREEBESTFIT (lines 11-12), inline
                if instances:
                    instance = instances.pop()
                    break
            else:  # line 6: no free instance fits
                instance = self._scale_up(queue, now_s)  # line 7
                if instance is None:  # line 8
                    self._blocked = queue
                    self._wait_blocked()  # line 9: the batch stays at the front of Q
                    break
            size = self._run_batch(instance, queue, now_s)  # lines 4 and 10
            order.popleft()  # the head request left with its batch, and so did size - 1 more
            queue.departed += size - 1
        if now_s >= self.record.next_sample_s:
            self.record.sample(now_s, self)

    def _scale_up(self, queue: KeyQueue, now_s: float) -> Instance | None:
        """Loads instances of (segment, width) for the head (lines 6-7; see the module doc).

        Returns one instance for the head's batch; further ones go to the free pool, where the
        next heads find them.
        """
        pool_key = queue.pool_key
        if self._loaded[pool_key] == 0:
            wanted = 1
        elif len(queue.dones) >= self._scale_queue_threshold:
            wanted = self.config.scale_max_new
        else:
            return None
        segment, width = pool_key
        first = None
        for _ in range(wanted):
            if not self._can_load(segment, width):
                break
            pool = self._free[pool_key]
            handle = self.backend.load(segment, width)
            instance = Instance(segment, width, handle, now_s, pool, self._batch_done)
            self._loaded[pool_key] += 1
            self._instances_loaded += 1
            self.record.loads += 1
            if first is None:
                first = instance
            else:
                pool.append(instance)
        return first

    def _can_load(self, segment: int, width: float) -> bool:
        """CANLOAD (lines 13-20): VRAM cap M_max, then the utilisation block U_blk."""
        needed_bytes = self.backend.instance_bytes(segment, width)  # line 14
        self._memory_blocked = self.backend.vram_used_bytes() + needed_bytes > self.vram_cap_bytes
        if self._memory_blocked:  # line 15
            return False
        utilization = self.backend.utilization_pct()  # line 17
        return utilization is None or utilization < self.config.util_block_pct  # line 18

    def _run_batch(self, instance: Instance, queue: KeyQueue, now_s: float) -> int:
        """Takes up to B_max head-key requests (line 4) and runs them on ``instance`` (line 10).

        Returns:
            The batch size.
        """
        size = len(queue.dones)
        if size > self._max_batch:
            size = self._max_batch
        enqueued_s, dones, payloads = queue.take(size)
        self._queued -= size
        self._queued_by_segment[instance.segment] -= size
        self._start_batch(instance, queue.segment_key, enqueued_s, dones, payloads, now_s)
        return size

    def _start_batch(
        self,
        instance: Instance,
        key: SegmentKey,
        enqueued_s: list[float],
        dones: list[Callable[..., None]],
        payloads: list[Any],
        now_s: float,
    ) -> None:
        """Runs the requests (enqueue times, dones, payloads) on ``instance`` (line 10)."""
        instance.batch = (enqueued_s, dones, payloads)
        self._telemetry = None
        self._running += 1  # line 10: inst.busy <- true (it is out of its free list)
        record = self.record
        # now - t_enq of each request; map, unlike a comprehension, runs no Python frame
        record.queue_durations_s.extend(map(sub, repeat(now_s), enqueued_s))
        backend = self.backend
        backend.run_batch(instance.handle, key, payloads, instance.end_batch)
        vram_bytes = backend.vram_used_bytes()
        if vram_bytes > record.peak_vram_bytes:
            record.peak_vram_bytes = vram_bytes

    def _batch_done(self, instance: Instance, outputs: Sequence[Any]) -> None:
        now_s = self.clock.now_s()
        instance.t_last_s = now_s  # line 10: update inst.t_last
        instance.pool.append(instance)
        self._running -= 1
        self._telemetry = None
        enqueued_s, dones, payloads = instance.batch
        telemetry = self.record
        telemetry.batches += 1
        telemetry.completed += len(dones)
        telemetry.request_durations_s.extend(map(sub, repeat(now_s), enqueued_s))
        if self._unload_at_s is None:
            self._arm_unloader(now_s + self.config.idle_unload_s)
        width = instance.width
        first = dones[0]
        if first in self._batch_callbacks and dones.count(first) == len(dones):
            first(width, list(outputs))  # the whole batch came from submit_many's caller
        else:
            for done, payload, output in zip(dones, payloads, outputs, strict=True):
                if done in self._batch_callbacks:
                    done(width, [output])
                elif payload is None:
                    done(width)
                else:
                    done(width, output)
        self._dispatch(now_s)

    def _wait_blocked(self) -> None:
        """Line 9 without spinning: a batch end runs the loop again, and so does an unload if
        memory blocked the head; otherwise a retry timer does (a live device may be busy with
        someone else's work, and an unload t_idle away lifts no utilisation block: waiting for
        it stalled the live CPU executor for most of each benchmark round)."""
        if self._running or self._retry_pending:
            return
        if self._unload_at_s is not None and self._memory_blocked:
            return
        self._retry_pending = True
        self.clock.schedule_in(self.config.blocked_retry_s, self._retry)

    def _retry(self) -> None:
        self._retry_pending = False
        self._dispatch(self.clock.now_s())

    def _arm_unloader(self, at_s: float) -> None:
        self._unload_at_s = at_s
        self.clock.schedule_in(at_s - self.clock.now_s(), self._unload_idle)

    def _unload_idle(self) -> None:
        """UNLOADERLOOP (lines 21-25): offload every free instance idle for t_idle or more."""
        now_s = self.clock.now_s()
        idle_s = self.config.idle_unload_s
        earliest_s = None
        for pool_key, instances in self._free.items():
            keep = []
            for instance in instances:  # line 23: the free lists hold the non-busy ones
                if instance.t_last_s + idle_s <= now_s:  # line 24
                    self.backend.unload(instance.handle)  # line 25
                    self._loaded[pool_key] -= 1
                    self._instances_loaded -= 1
                    self.record.unloads += 1
                else:
                    keep.append(instance)
                    if earliest_s is None or instance.t_last_s < earliest_s:
                        earliest_s = instance.t_last_s
            instances[:] = keep
        self._unload_at_s = None
        if earliest_s is not None:
            self._arm_unloader(earliest_s + idle_s)
        self._dispatch(now_s)
