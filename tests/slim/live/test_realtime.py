"""RealTimeLoop: EventLoop's ordering on the wall clock, and hand-off from other threads."""

from __future__ import annotations

import threading
import time

import pytest

from hetsched.core.realtime import RealTimeLoop


def test_due_events_run_in_time_then_priority_then_scheduling_order() -> None:
    loop = RealTimeLoop()
    order: list[str] = []
    at_s = loop.now_s() + 0.02
    loop.schedule(at_s + 0.01, lambda: order.append("late"))
    loop.schedule(at_s, lambda: order.append("a"))
    loop.schedule(at_s, lambda: order.append("b"))
    loop.schedule(at_s, lambda: order.append("urgent"), priority=-1)
    assert loop.run_until(lambda: len(order) == 4, timeout_s=2.0)
    assert order == ["urgent", "a", "b", "late"]
    assert loop.now_s() >= at_s + 0.01


def test_schedule_in_waits_for_the_wall_clock_and_cancel_skips() -> None:
    loop = RealTimeLoop()
    fired: list[float] = []
    start_s = loop.now_s()
    loop.schedule_in(0.05, lambda: fired.append(loop.now_s()))
    loop.schedule_in(0.01, lambda: fired.append(-1.0)).cancel()
    assert loop.run_until(lambda: bool(fired), timeout_s=2.0)
    assert fired[0] - start_s >= 0.05
    assert -1.0 not in fired
    with pytest.raises(ValueError, match="finite"):
        loop.schedule(float("nan"), lambda: None)


def test_a_moment_already_past_runs_first_and_is_no_error() -> None:
    # The executor arms timers as schedule_in(at_s - now_s()); on a wall clock that is < 0 when
    # the clock moved between the two reads.
    loop = RealTimeLoop()
    order: list[str] = []
    loop.schedule_in(0.0, lambda: order.append("now"))
    loop.schedule_in(-0.001, lambda: order.append("past"))
    assert loop.run_until(lambda: len(order) == 2, timeout_s=1.0)
    assert order == ["past", "now"]


def test_run_until_times_out_when_the_predicate_never_holds() -> None:
    loop = RealTimeLoop()
    start = time.monotonic()
    assert not loop.run_until(lambda: False, timeout_s=0.05)
    assert 0.05 <= time.monotonic() - start < 1.0


def test_workers_hand_back_to_the_loop_thread_in_posting_order() -> None:
    loop = RealTimeLoop()
    threads_seen: set[int] = set()
    results: list[int] = []

    def worker(first: int) -> None:
        for i in range(first, first + 50):
            time.sleep(0.0005)
            loop.call_soon_threadsafe(
                lambda i=i: (threads_seen.add(threading.get_ident()), results.append(i))
            )

    workers = [threading.Thread(target=worker, args=(k * 100,)) for k in range(4)]
    for thread in workers:
        thread.start()
    assert loop.run_until(lambda: len(results) == 200, timeout_s=10.0)
    for thread in workers:
        thread.join()
    assert threads_seen == {threading.get_ident()}  # every callback on the driving thread
    for k in range(4):  # one worker's posts keep their order
        mine = [r for r in results if k * 100 <= r < k * 100 + 50]
        assert mine == list(range(k * 100, k * 100 + 50))


def test_background_mode_runs_callbacks_on_one_thread_and_stops() -> None:
    loop = RealTimeLoop()
    seen: list[int] = []
    done = threading.Event()
    loop.start()
    with pytest.raises(RuntimeError, match="already"):
        loop.start()
    with pytest.raises(RuntimeError, match="background"):
        loop.run_until(lambda: True)
    for i in range(5):
        loop.schedule_in(
            0.001 * i, lambda i=i: (seen.append(threading.get_ident()), i == 4 and done.set())
        )
    assert done.wait(2.0)
    loop.stop()
    assert len(set(seen)) == 1 and seen[0] != threading.get_ident()
    assert loop.events_processed == 5


def test_a_failing_callback_surfaces_in_the_caller() -> None:
    loop = RealTimeLoop()
    loop.call_soon_threadsafe(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        loop.run_until(lambda: False, timeout_s=1.0)

    loop.start()
    loop.call_soon_threadsafe(lambda: 1 / 0)
    time.sleep(0.05)
    with pytest.raises(ZeroDivisionError):
        loop.stop()


def test_stop_from_a_callback_ends_run_until() -> None:
    loop = RealTimeLoop()
    loop.schedule_in(0.01, loop.stop)
    assert not loop.run_until(lambda: False, timeout_s=5.0)
