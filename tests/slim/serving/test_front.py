"""The front's routing, re-routing and exactly-once answers, on a fake pool (no Ray)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hetsched.core.events import WallClock
from hetsched.slim.routers import ROUTERS
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.metrics import ServingMetrics
from tests.slim.serving.fakes import FakePool

WIDTHS = (0.25, 0.5, 0.75, 1.0)


def make_front(pool, *, router="random", max_images=1000, max_attempts=3):
    return Front(
        pool,
        ROUTERS.create(router, seed=0),
        AdmissionController(max_images),
        WallClock(),
        ServingMetrics(),
        widths=WIDTHS,
        group_sizes=(1, 4, 8),
        max_attempts=max_attempts,
    )


async def settle(futures):
    return await asyncio.gather(*futures, return_exceptions=True)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_every_image_is_answered_with_its_own_label():
    async def scenario():
        front = make_front(FakePool())
        front.start()
        futures = front.submit(list(range(10)) * 5)
        results = await settle(futures)
        await front.stop()
        return front, results

    front, results = run(scenario())
    labels = [int(np.argmax(r.logits)) for r in results]
    assert labels == list(range(10)) * 5
    assert all(len(r.widths) == 4 and set(r.widths) <= set(WIDTHS) for r in results)
    assert all(len(r.servers) == 4 for r in results)
    assert front.completed == 50 and front.admission.images_in_system == 0


def test_killed_server_is_masked_and_its_images_rerouted():
    async def scenario():
        pool = FakePool(seconds=0.01)
        front = make_front(pool)
        front.start()
        futures = front.submit(list(range(10)) * 20)
        while not pool.running(0):  # kill it while it holds a block
            await asyncio.sleep(0.001)
        calls_before_kill = len(pool.calls)
        pool.kill(0)
        results = await settle(futures)
        await front.stop()
        return pool, front, results, calls_before_kill

    pool, front, results, calls_before_kill = run(scenario())
    assert all(not isinstance(r, BaseException) for r in results), results
    assert [int(np.argmax(r.logits)) for r in results] == list(range(10)) * 20
    assert sum(r.reroutes for r in results) > 0
    # After the kill the router never picks the dead server.
    assert all(up for _, up in pool.calls[calls_before_kill:])
    assert all(servers[-1] == "s1" for servers in (r.servers for r in results if r.reroutes))
    assert front.metrics.rerouted.labels("server_failed")._value.get() > 0


def test_a_rejoined_server_serves_again():
    async def scenario():
        pool = FakePool(seconds=0.005)
        front = make_front(pool, router="round-robin")
        front.start()
        pool.kill(1)
        first = await settle(front.submit(list(range(8))))
        pool.revive(1)
        second = await settle(front.submit(list(range(8))))
        await front.stop()
        return first, second

    first, second = run(scenario())
    assert all(set(r.servers) == {"s0"} for r in first)
    assert any("s1" in r.servers for r in second)


def test_image_fails_with_a_reason_after_max_attempts():
    async def scenario():
        pool = FakePool(n_servers=1, seconds=0.05)
        front = make_front(pool, max_attempts=1)
        front.start()
        futures = front.submit([1, 2])
        await asyncio.sleep(0.01)
        pool.kill(0)
        results = await settle(futures)
        await front.stop()
        return front, results

    front, results = run(scenario())
    assert all(isinstance(r, RequestError) for r in results)
    assert {(r.status, r.reason) for r in results} == {(503, "servers_failed")}
    assert "failed on 1 servers" in str(results[0])
    assert front.admission.images_in_system == 0


def test_lost_activation_restarts_the_image_from_segment_one():
    async def scenario():
        pool = FakePool()
        pool.lose_payloads_once = True
        front = make_front(pool)
        front.start()
        results = await settle(front.submit([3, 4, 5]))
        await front.stop()
        return front, results

    front, results = run(scenario())
    assert [int(np.argmax(r.logits)) for r in results] == [3, 4, 5]
    assert front.metrics.rerouted.labels("payload_lost")._value.get() >= 1


def test_lost_result_restarts_only_its_image():
    async def scenario():
        pool = FakePool()
        pool.lose_results_once = True
        front = make_front(pool)
        front.start()
        results = await settle(front.submit(list(range(10))))
        await front.stop()
        return front, results

    front, results = run(scenario())
    assert [int(np.argmax(r.logits)) for r in results] == list(range(10))
    assert front.metrics.rerouted.labels("payload_lost")._value.get() == 1
    assert front.completed == 10 and front.admission.images_in_system == 0


def test_server_error_fails_the_block_with_500():
    async def scenario():
        pool = FakePool()
        pool.error = ValueError("bad activation shape")
        front = make_front(pool)
        front.start()
        results = await settle(front.submit([1]))
        await front.stop()
        return results

    (error,) = run(scenario())
    assert isinstance(error, RequestError) and error.status == 500
    assert "bad activation shape" in str(error)


def test_admission_rejects_without_accepting_anything():
    async def scenario():
        pool = FakePool(seconds=0.05)
        front = make_front(pool, max_images=4)
        front.start()
        accepted = front.submit([1, 2, 3])
        with pytest.raises(RequestError) as full:
            front.submit([4, 5])
        pool.kill(0)
        pool.kill(1)
        with pytest.raises(RequestError) as down:
            front.submit([6])
        pool.revive(0)
        pool.revive(1)
        results = await settle(accepted)
        await front.stop()
        return front, full.value, down.value, results

    front, full, down, results = run(scenario())
    assert (full.status, full.reason) == (429, "queue_full")
    assert (down.status, down.reason) == (503, "no_server")
    assert front.metrics.rejected.labels("queue_full")._value.get() == 2
    assert front.arrived == 3 and front.admission.images_in_system == 0
    assert all(not isinstance(r, BaseException) for r in results)


def test_queued_image_past_its_deadline_gets_504():
    async def scenario():
        pool = FakePool(n_servers=1, seconds=0.05)
        pool.kill(0)  # nothing runs, so the images wait in the FIFO past their deadline
        front = make_front(pool)
        front.start()
        pool.up[0] = True  # up for admission ...
        futures = front.submit([1, 2], deadline_s=0.02)
        pool.up[0] = False  # ... then down before the router could place them
        results = await settle(futures)
        await front.stop()
        return results

    results = run(scenario())
    assert all(isinstance(r, RequestError) and r.status == 504 for r in results)
    assert "deadline passed" in str(results[0])


def test_an_image_in_a_server_gets_its_504_at_the_deadline_and_stops_there():
    """The API promises an answer by the deadline: a block that comes back later must not
    delay the 504, and the image's later segments must not run."""

    async def scenario():
        pool = FakePool(n_servers=1, seconds=0.3)
        front = make_front(pool)
        front.start()
        started = asyncio.get_running_loop().time()
        futures = front.submit([1, 2], deadline_s=0.05)
        results = await settle(futures)
        answered_after_s = asyncio.get_running_loop().time() - started
        held_while_in_server = front.admission.images_in_system
        while pool.running(0):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        await front.stop()
        return front, pool, results, answered_after_s, held_while_in_server

    front, pool, results, answered_after_s, held = run(scenario())
    assert all(isinstance(r, RequestError) and r.status == 504 for r in results)
    assert "at segment 1 of 4" in str(results[0])
    assert answered_after_s < 0.25  # at the deadline, not when the 0.3 s block returned
    assert held == 2  # the images still occupy the server until their segment ends ...
    assert front.admission.images_in_system == 0  # ... then free their slots
    assert len(pool.calls) == 1  # no later segment ran
    assert front.metrics.images.labels("deadline_exceeded")._value.get() == 2
    assert front.completed == 0


def test_an_image_whose_client_left_stops_at_the_next_segment():
    async def scenario():
        pool = FakePool(n_servers=1, seconds=0.05)
        front = make_front(pool, router="jsq-1.0")
        front.start()
        (future,) = front.submit([3])
        await asyncio.sleep(0.01)  # in the server, segment 1
        future.cancel()
        await asyncio.sleep(0.2)  # long enough for all four segments, had they run
        await front.stop()
        return front, pool

    front, pool = run(scenario())
    assert len(pool.calls) == 1
    assert front.admission.images_in_system == 0 and front.completed == 0


def test_a_queued_image_whose_client_left_is_never_sent_to_a_server():
    async def scenario():
        pool = FakePool(n_servers=1)
        front = make_front(pool)
        front.start()
        (future,) = front.submit([4])
        future.cancel()  # before the routing loop's next turn places it
        await asyncio.sleep(0.2)  # several routing-loop polls
        await front.stop()
        return front, pool

    front, pool = run(scenario())
    assert pool.calls == [] and front.admission.images_in_system == 0


class IgnoresMasks:
    """A router that always picks server 0, available or not (none of the registered ones)."""

    def decide(self, state):
        from hetsched.slim.routers import RoutingDecision

        return RoutingDecision(0, 1.0, 4)


def test_a_router_choosing_a_dead_server_fails_the_block_but_not_the_front():
    async def scenario():
        pool = FakePool()
        front = make_front(pool)
        front.router = IgnoresMasks()
        front.start()
        pool.kill(0)
        failed = await settle(front.submit([1, 2]))
        pool.revive(0)
        served = await settle(front.submit([3]))
        await front.stop()
        return failed, served

    failed, served = run(scenario())
    assert all(isinstance(r, RequestError) and r.reason == "router_error" for r in failed)
    assert "s0, which is down" in str(failed[0])
    assert int(np.argmax(served[0].logits)) == 3


def test_min_width_is_a_floor_for_every_segment():
    async def scenario():
        front = make_front(FakePool(), router="static-slimmest")
        front.start()
        floored = await settle(front.submit(list(range(8)), min_width=0.6))
        free = await settle(front.submit(list(range(8))))
        with pytest.raises(RequestError) as caught:
            front.submit([1], min_width=1.0 + 1e-3)
        await front.stop()
        return floored, free, caught.value

    floored, free, error = run(scenario())
    assert all(set(r.widths) == {0.75} for r in floored)  # the narrowest width >= 0.6
    assert all(set(r.widths) == {0.25} for r in free)
    assert (error.status, error.reason) == (422, "min_width_unavailable")


def test_widths_narrow_as_the_system_fills():
    front = make_front(FakePool(), router="static-widest", max_images=10)
    front.shed_from = 0.5
    caps = []
    for in_system in (0, 4, 5, 7, 9):
        front.admission.images_in_system = in_system
        caps.append(front.width_cap())
    assert caps == [1.0, 1.0, 1.0, 0.5, 0.25]
    front.shed_from = 1.0  # never shed
    assert front.width_cap() == 1.0
