"""The routing front: global FIFO → router → server pool, with re-routing when a server fails.

This is the live counterpart of :class:`hetsched.slim.cluster.slim_cluster.SlimCluster` (the same
request lifecycle, paper section III and ARCHITECTURE.md "Request lifecycle"), written for an
asyncio loop and servers that can die:

1. An accepted image enters the global FIFO needing segment 0.
2. Whenever the FIFO is not empty and a server is up, the router sees a :class:`RouterState`
   (servers that are down are masked: ``ServerView.available``) and returns (server, width, g);
   up to g head images leave the FIFO as one block for that server's next segment.
3. The pool runs the block on the server; each image comes back with the width actually run and
   a handle of its output activation (which stays in Ray's object store), and returns to the FIFO
   tail, or is answered after the last segment.

The width the block runs at is the router's, capped by load shedding and raised to the block's
accuracy floor (:mod:`.jobs`). The router sees the head image's deadline and slack in
:class:`RouterState`, so an SLO-aware router can also act on them itself.

Deadlines are kept as the API promises them (every image answered by its deadline, else 504):
when a request's deadline passes, each of its images not yet answered gets its 504 at once, not
when its segment comes back. An image waiting in the FIFO is dropped there; one in a server is
dropped when its block returns, and frees its admission slot then (it held the server until
that segment ended), so late work stops at the next segment boundary instead of running on.
Images whose client went away (a cancelled future) stop at the next boundary the same way.

Failures never lose an accepted image and never answer one twice. Each image owns one future,
resolved exactly once (a result, or a :class:`RequestError` naming why). When a server dies, its
in-flight blocks fail with :class:`ServerFailedError` and their images go back to the FIFO head
keeping their last activation, so the router places them on a server that is still up; after
``max_attempts`` failures of one segment the image fails with 503. When an input activation was
lost with its host (:class:`PayloadLostError`), the image restarts from segment 0 with its original
image, which the front holds. A server error that is not a failure of the server (a bug, a bad
input) fails the block's images with 500 instead of retrying them forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import Any

from hetsched.core.events import Clock
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.model.slimresnet import INPUT_WIDTH, NUM_SEGMENTS
from hetsched.slim.routers.base import Router, RouterState, ServerView
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.blocks import (
    BlockItem,
    ItemResult,
    PayloadLostError,
    ServerFailedError,
    ServerPool,
)
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.jobs import ImageResult, Job, width_cap, width_floor
from hetsched.slim.serving.metrics import ServingMetrics

LOG = logging.getLogger(__name__)
IDLE_POLL_S = 0.05
"""How often the router re-checks a non-empty FIFO while no server is up."""


class Front:
    """Global FIFO and routing loop over a :class:`ServerPool`.

    Args:
        pool: The servers.
        router: Any registered router (``decide(RouterState) -> RoutingDecision``).
        admission: Admission controller (bounded images in system, deadlines).
        clock: Time source (wall clock live).
        metrics: Prometheus metrics to record into.
        widths, group_sizes: The router's action sets.
        max_attempts: Failures of one segment before its image fails with 503.
        shed_from: Fraction of the admission budget in use from which routed widths are capped,
            narrower as the system fills (shed work before refusing it); 1.0: never.
        completion: The servers' device models and backlogs
            (:func:`~hetsched.slim.sim.device_predictions.device_completion_model`), from which
            routers read predicted completion times; None: no predictions (a router that needs
            them fails each head image with a 500).
    """

    def __init__(
        self,
        pool: ServerPool,
        router: Router,
        admission: AdmissionController,
        clock: Clock,
        metrics: ServingMetrics,
        *,
        widths: tuple[float, ...],
        group_sizes: tuple[int, ...],
        max_attempts: int = 3,
        shed_from: float = 1.0,
        completion: CompletionModel | None = None,
    ) -> None:
        self.pool = pool
        self.completion = completion
        self.router = router
        self.admission = admission
        self.clock = clock
        self.metrics = metrics
        self.widths = widths
        self.group_sizes = group_sizes
        self.max_attempts = max_attempts
        self.shed_from = shed_from
        self.fifo: deque[Job] = deque()
        self.in_flight = [0] * len(pool.names)
        self.arrived = 0
        self.completed = 0
        self._wake = asyncio.Event()
        self._blocks: set[asyncio.Task] = set()
        self._loop_task: asyncio.Task | None = None
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the routing loop on the running asyncio loop."""
        self._loop_task = asyncio.get_running_loop().create_task(self._route_forever())
        self._loop_task.add_done_callback(_log_crash)

    async def stop(self) -> None:
        """Stops routing; images still queued are answered 503 (the server is shutting down)."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await self._loop_task
        for task in list(self._blocks):
            task.cancel()
        await asyncio.gather(*self._blocks, return_exceptions=True)
        while self.fifo:
            self._fail(self.fifo.popleft(), RequestError(503, "server shutting down", "shutdown"))

    def servers_up(self) -> int:
        """How many servers are serving now."""
        return sum(self.pool.is_up(i) for i in range(len(self.pool.names)))

    # -- requests -------------------------------------------------------------------------------

    def check(self, images: int, deadline_s: float | None) -> RequestError | None:
        """Admission's verdict on ``images`` more now, without accepting them (the HTTP layer
        asks this from a request's headers, before reading its body); refusals are counted."""
        refusal = self.admission.check(images, servers_up=self.servers_up(), deadline_s=deadline_s)
        if refusal is not None:
            self.metrics.rejected.labels(refusal.reason).inc(images)
        return refusal

    def submit(
        self,
        images: Sequence[Any],
        deadline_s: float | None = None,
        min_width: float | None = None,
    ) -> list[asyncio.Future[ImageResult]]:
        """Accepts ``images`` (one request) or raises; returns one future per image.

        Args:
            images: Segment-0 inputs (arrays, or handles the pool understands).
            deadline_s: Seconds from now by which every image must be answered, or None.
            min_width: No segment of these images runs narrower, or None (no floor).

        Raises:
            RequestError: 422 for a ``min_width`` above every served width; 429/503 from
                admission control (nothing was accepted).
        """
        floor = width_floor(self.widths, min_width)
        now_s = self.clock.now_s()
        try:
            self.admission.admit(
                now_s, len(images), servers_up=self.servers_up(), deadline_s=deadline_s
            )
        except RequestError as error:
            self.metrics.rejected.labels(error.reason).inc(len(images))
            raise
        loop = asyncio.get_running_loop()
        futures = []
        jobs = []
        for image in images:
            job = Job(
                self.arrived,
                image,
                now_s,
                None if deadline_s is None else now_s + deadline_s,
                floor,
                loop.create_future(),
                now_s,
            )
            self.arrived += 1
            self.fifo.append(job)
            jobs.append(job)
            futures.append(job.future)
        if deadline_s is not None:
            loop.call_later(deadline_s, self._deadline_passed, jobs)
        self.metrics.images_in_system.set(self.admission.images_in_system)
        self._wake.set()
        return futures

    def width_cap(self) -> float:
        """The widest width the router may use now (:func:`.jobs.width_cap`)."""
        used = self.admission.images_in_system / self.admission.max_images_in_system
        return width_cap(self.widths, used, self.shed_from)

    # -- routing --------------------------------------------------------------------------------

    def state(self) -> RouterState:
        """The router's snapshot: eq. (1) telemetry, servers that are down masked out."""
        pool = self.pool
        head = self.fifo[0] if self.fifo else None
        views = [
            ServerView(
                name,
                self.in_flight[i],
                (telemetry := pool.telemetry(i)).power_w,
                telemetry.max_power_w,
                telemetry.utilization_pct,
                available=pool.is_up(i),
                **self._predictions(i, head),
            )
            for i, name in enumerate(pool.names)
        ]
        now_s = self.clock.now_s()
        deadline_s = math.inf if head is None or head.deadline_s is None else head.deadline_s
        return RouterState(
            now_s=now_s,
            fifo_length=len(self.fifo),
            completed=self.completed,
            arrived=self.arrived,
            head_segment=0 if head is None else head.segment,
            servers=tuple(views),
            widths=self.widths,
            group_sizes=self.group_sizes,
            head_deadline_s=deadline_s,
            head_slack_s=deadline_s - now_s,
            head_prev_width=head.widths[-1] if head is not None and head.widths else None,
        )

    def _predictions(self, server: int, head: Job | None) -> dict[str, Any]:
        """A view's backlog and lazily predicted completion times for ``head`` on ``server``
        (nothing without a completion model)."""
        completion = self.completion
        if completion is None:
            return {}
        segment = 0 if head is None else head.segment
        prev_width = head.widths[-1] if head is not None and head.widths else None
        place = (server, segment, prev_width, self._location(head), self.widths)
        return {
            "backlog_s": completion.backlog_s[server],
            "predict": partial(completion.predict, *place),
            "predict_block": partial(completion.predict_block, *place),
        }

    def _location(self, job: Job | None) -> int | None:
        """Index of the server holding the job's activation (None: still at the front)."""
        if job is None or not job.servers:
            return None
        return self.pool.names.index(job.servers[-1])

    async def _route_forever(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(IDLE_POLL_S):
                    await self._wake.wait()
            self._wake.clear()
            while self.fifo and self.servers_up() > 0:
                self.route_head()
            self.metrics.fifo_length.set(len(self.fifo))

    def route_head(self) -> None:
        """One decision: the router places the head block; its images leave the FIFO.

        A router that raises fails the head image with a 500 and the loop goes on: a routing
        bug must answer, never leave every queued request waiting for its client's timeout.
        """
        try:
            decision = self.router.decide(self.state())
        except Exception as bug:  # any router bug: answer the head, keep routing
            name = type(self.router).__name__
            LOG.warning("router %s failed: %r", name, bug)
            message = f"router {name} failed: {type(bug).__name__}: {bug}"
            self._fail(self.fifo.popleft(), RequestError(500, message, "router_error"))
            return
        count = min(decision.group_size, len(self.fifo))
        jobs = [self.fifo.popleft() for _ in range(count)]
        if any(job.unwanted for job in jobs):
            for job in jobs:
                if job.unwanted:
                    self._release(job)
            jobs = [job for job in jobs if not job.unwanted]
            if not jobs:
                return
        if not self.pool.is_up(decision.server):  # a router that ignores ServerView.available
            error = RequestError(
                500,
                f"router {type(self.router).__name__} chose server"
                f" {self.pool.names[decision.server]}, which is down",
                "router_error",
            )
            for job in jobs:
                self._fail(job, error)
            return
        now_s = self.clock.now_s()
        for job in jobs:
            waited_s = now_s - job.fifo_enter_s
            job.queue_s += waited_s
            self.metrics.queue_seconds.labels("fifo").observe(waited_s)
        self.in_flight[decision.server] += len(jobs)
        width = self._block_width(decision.width, jobs)
        booked_s = self._book(decision.server, width, jobs)
        task = asyncio.get_running_loop().create_task(
            self._run_block(decision.server, width, jobs, booked_s)
        )
        self._blocks.add(task)
        task.add_done_callback(self._blocks.discard)

    def _book(self, server: int, width: float, jobs: list[Job]) -> float:
        """Books the block's device time on the server's predicted backlog; returns it."""
        completion = self.completion
        if completion is None:
            return 0.0
        return sum(
            completion.book(server, job.segment, width, job.widths[-1] if job.widths else None)
            for job in jobs
        )

    def _block_width(self, chosen: float, jobs: list[Job]) -> float:
        """The router's width, capped by load shedding and raised to the block's floor (a
        client's accuracy floor outranks shedding)."""
        floor = max(job.min_width for job in jobs)
        return max(floor, min(chosen, self.width_cap()))

    def _deadline_passed(self, jobs: list[Job]) -> None:
        """At a request's deadline: each of its images not answered yet gets its 504 now and is
        dropped at its next segment boundary (``route_head``, ``_advance``, ``_requeue``)."""
        now_s = self.clock.now_s()
        for job in jobs:
            if job.future.done() or job.abandoned:  # answered, or its client went away
                continue
            error = job.deadline_error(now_s)
            self.metrics.images.labels(error.reason).inc()
            self.metrics.dropped.labels(error.reason).inc()
            job.abandoned = True
            job.future.set_exception(error)

    # -- blocks ---------------------------------------------------------------------------------

    async def _run_block(
        self, server: int, width: float, jobs: list[Job], booked_s: float = 0.0
    ) -> None:
        items = [
            BlockItem(
                job.segment,
                job.widths[-1] if job.widths else INPUT_WIDTH,
                job.image if job.payload is None else job.payload,
            )
            for job in jobs
        ]
        try:
            results = await self.pool.run_block(server, width, items)
        except ServerFailedError as failure:
            self.metrics.server_failures.labels(self.pool.names[server]).inc()
            self._requeue(jobs, failure)
        except PayloadLostError:
            self._restart(jobs)
        except Exception as error:  # a server-side error that retrying would repeat
            for job in jobs:
                self._fail(
                    job,
                    RequestError(
                        500,
                        f"server {self.pool.names[server]} failed segment {job.segment + 1}:"
                        f" {type(error).__name__}: {error}",
                        "server_error",
                    ),
                )
        else:
            await self._advance(server, jobs, results)
        finally:
            self.in_flight[server] -= len(jobs)
            if self.completion is not None:
                self.completion.release(server, booked_s)
            self._wake.set()

    def _restart(self, jobs: list[Job]) -> None:
        """Images whose input activation is gone start again from segment 1."""
        self.metrics.rerouted.labels("payload_lost").inc(len(jobs))
        for job in jobs:
            job.restart()
        self._requeue(jobs, None)

    def _requeue(self, jobs: list[Job], failure: ServerFailedError | None) -> None:
        """Puts a failed block's images back at the FIFO head, in their order."""
        now_s = self.clock.now_s()
        for job in reversed(jobs):
            if job.unwanted:
                self._release(job)
                continue
            if failure is not None:
                job.failures += 1
                if job.failures >= self.max_attempts:
                    self._fail(job, job.servers_failed_error(failure))
                    continue
                job.reroutes += 1
                self.metrics.rerouted.labels("server_failed").inc()
            job.fifo_enter_s = now_s
            self.fifo.appendleft(job)

    async def _advance(self, server: int, jobs: list[Job], results: list[ItemResult]) -> None:
        """Records each image's finished segment; answers those that ran the last one."""
        finished = []
        for job, result in zip(jobs, results, strict=True):
            if job.unwanted:  # served a segment, then left: a departure for the drain rate
                self._release(job, completed=True)
                continue
            job.widths.append(result.executed_width)
            job.servers.append(self.pool.names[server])
            job.payload = result.output
            job.segment += 1
            job.failures = 0
            job.queue_s += result.queue_s
            job.compute_s += result.compute_s
            self.metrics.queue_seconds.labels("executor").observe(result.queue_s)
            self.metrics.compute_seconds.labels(self.pool.names[server]).observe(result.compute_s)
            if job.segment >= NUM_SEGMENTS:
                finished.append(job)
            else:
                job.fifo_enter_s = self.clock.now_s()
                self.fifo.append(job)
        if not finished:
            return
        logits = await asyncio.gather(
            *(self.pool.fetch(job.payload) for job in finished), return_exceptions=True
        )
        now_s = self.clock.now_s()
        for job, values in zip(finished, logits, strict=True):
            if isinstance(values, PayloadLostError):
                self._restart([job])
                continue
            if isinstance(values, BaseException):
                self._fail(
                    job,
                    RequestError(
                        500, f"fetching the result failed: {values!r}", "result_unavailable"
                    ),
                )
                continue
            self._answer(job, job.result(values, now_s))

    # -- answers (exactly once per image) ---------------------------------------------------------

    def _answer(self, job: Job, result: ImageResult) -> None:
        if job.abandoned:  # its 504 went out at the deadline; it was served all the same
            self._release(job, completed=True)
            return
        self.completed += 1
        self.metrics.images.labels("served").inc()
        self.metrics.image_seconds.observe(result.latency_s)
        self.admission.observe_latency(result.latency_s)
        if self._settle(job, completed=True):
            job.future.set_result(result)

    def _fail(self, job: Job, error: RequestError) -> None:
        if job.abandoned:  # its 504 went out at the deadline
            self._release(job)
            return
        self.metrics.images.labels(error.reason).inc()
        self.metrics.dropped.labels(error.reason).inc()
        if self._settle(job, completed=False):
            job.future.set_exception(error)

    def _settle(self, job: Job, *, completed: bool) -> bool:
        """Frees the image's admission slot; False when nobody waits any more (client gone)."""
        if job.future.done() and not job.future.cancelled():
            raise RuntimeError(f"image {job.image_id} answered twice")  # a front bug: never hide
        self._release(job, completed=completed)
        return not job.future.cancelled()

    def _release(self, job: Job, *, completed: bool = False) -> None:
        """Frees the image's admission slot (once: it has left the system). ``completed``: it
        left after being served (counted in admission's drain rate), not failed or dropped
        unserved."""
        self.admission.release(self.clock.now_s(), 1, completed=completed)
        self.metrics.images_in_system.set(self.admission.images_in_system)


def _log_crash(task: asyncio.Task) -> None:
    """A routing loop that ends with an exception is a bug: say so loudly."""
    if not task.cancelled() and task.exception() is not None:
        LOG.error("routing loop crashed", exc_info=task.exception())
