import pytest

from hetsched.core.events import EventHandle, EventLoop, _Event


def test_events_run_in_time_order_with_deterministic_ties():
    loop = EventLoop()
    order = []
    loop.schedule(2.0, lambda: order.append("late"))
    loop.schedule(1.0, lambda: order.append("a"))
    loop.schedule(1.0, lambda: order.append("b"))
    loop.schedule(1.0, lambda: order.append("urgent"), priority=-1)
    assert loop.run() == 4
    assert order == ["urgent", "a", "b", "late"]
    assert loop.now_s() == 2.0


def test_cancelled_event_does_not_run_and_until_advances_clock():
    loop = EventLoop()
    ran = []
    handle = loop.schedule(1.0, lambda: ran.append(1))
    loop.schedule(5.0, lambda: ran.append(5))
    handle.cancel()
    loop.run(until_s=3.0)
    assert ran == []
    assert loop.now_s() == 3.0
    loop.run()
    assert ran == [5]


def test_callbacks_can_schedule_more_events():
    loop = EventLoop()
    seen = []

    def tick():
        seen.append(loop.now_s())
        if len(seen) < 3:
            loop.schedule_in(0.5, tick)

    loop.schedule(0.0, tick)
    loop.run()
    assert seen == [0.0, 0.5, 1.0]


def test_scheduling_in_the_past_is_rejected():
    loop = EventLoop(start_s=10.0)
    with pytest.raises(ValueError, match="before now"):
        loop.schedule(5.0, lambda: None)
    with pytest.raises(ValueError, match="delay"):
        loop.schedule_in(-1.0, lambda: None)
    with pytest.raises(ValueError, match="finite"):
        loop.schedule(float("nan"), lambda: None)


def test_max_events_stops_early():
    loop = EventLoop()
    for t in range(5):
        loop.schedule(float(t), lambda: None)
    assert loop.run(max_events=2) == 2
    assert loop.now_s() == 1.0
    assert loop.run() == 3


def test_cancelled_events_are_skipped_by_peek_step_run_and_max_events():
    loop = EventLoop()
    ran = []
    first = loop.schedule(1.0, lambda: ran.append(1))
    loop.schedule(2.0, lambda: ran.append(2))
    third = loop.schedule(3.0, lambda: ran.append(3))
    loop.schedule(4.0, lambda: ran.append(4))
    assert first.time_s == 1.0
    first.cancel()
    first.cancel()  # harmless twice
    assert loop.peek_time_s() == 2.0 and loop.pending == 3
    third.cancel()
    assert loop.run(max_events=2) == 2  # the cancelled 3.0 is not counted
    assert ran == [2, 4] and loop.now_s() == 4.0 and loop.events_processed == 2
    assert not loop.step() and loop.peek_time_s() is None


def test_the_real_time_loops_named_event_is_cancelled_by_a_handle():
    event = _Event(1.5, 0, 7, print)
    assert (event.time_s, event.callback, event.cancelled) == (1.5, print, False)
    assert _Event(1.5, -1, 8, print) < event < _Event(1.5, 0, 9, print)  # time, priority, order
    EventHandle(event).cancel()
    assert event.cancelled and event.callback is None
