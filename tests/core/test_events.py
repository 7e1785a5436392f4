import pytest

from hetsched.core.events import EventLoop


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
