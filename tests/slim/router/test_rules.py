"""The fixed-width and deadline-aware rules on hand-built states: each rule's choice on small
cases, in seconds chosen so the right answer is clear by reading."""

import pytest

from hetsched.core.errors import ConfigError
from hetsched.slim.routers import ROUTERS, RouterState, ServerView
from hetsched.slim.routers.predictions import expected_image_done

from .conftest import GROUPS, WIDTHS


def view(done_ms, *, queue=0, backlog_ms=0.0, transfer_ms=0.0, power_w=200.0, available=True):
    """A server whose head image would finish after ``done_ms`` per width (0.25 .. 1.0)."""
    done_s = tuple(d / 1e3 for d in done_ms)
    return ServerView(
        "s", queue, 50.0, power_w, 10.0, available, backlog_ms / 1e3, transfer_ms / 1e3,
        done_s, done_s,
    )  # fmt: skip


def state(*servers, slack_ms=100.0, segment=3):
    """The head needs its last segment by default, so no backlog is charged again."""
    return RouterState(
        0.0, 5, 0, 5, segment, tuple(servers), WIDTHS, GROUPS,
        head_deadline_s=slack_ms / 1e3, head_slack_s=slack_ms / 1e3,
    )  # fmt: skip


FAST = (2, 3, 4, 5)
SLOW = (20, 40, 60, 80)


def decide(name, s, **kwargs):
    d = ROUTERS.create(name, **kwargs).decide(s)
    return d.server, d.width, d.group_size


def test_constant_best_keeps_the_fastest_device_whatever_its_queue_unless_it_is_down():
    first = state(view(SLOW), view((5, 6, 7, 9), transfer_ms=2.0), view((5, 6, 7, 8)))
    assert decide("constant-best", first) == (1, 1.0, 16)  # 9 ms - 2 ms transfer: fastest alone
    crowded = state(view(SLOW), view((90, 90, 90, 92), backlog_ms=85.0), view((5, 6, 7, 8)))
    assert decide("constant-best", crowded) == (1, 1.0, 16)  # 92 - 85 ms of backlog ahead
    down = state(view(SLOW), view(FAST, available=False), view((5, 6, 7, 8)))
    assert decide("constant-best", down, group_size=4) == (2, 1.0, 4)


def test_jsq_keeps_its_width_and_joins_the_shortest_available_queue():
    s = state(
        view(FAST, queue=3),
        view(SLOW, queue=1, backlog_ms=9.0),
        view(SLOW, queue=1, backlog_ms=2.0),
        view(FAST, queue=0, available=False),
    )
    assert decide("jsq-0.5", s) == (2, 0.5, 16)  # tie on queue length -> smaller backlog
    assert [decide(f"jsq-{w}", s)[1] for w in ("0.25", "0.75", "1.0")] == [0.25, 0.75, 1.0]
    assert decide("jsq-0.25", s, group_size=4) == (2, 0.25, 4)
    odd = RouterState(0.0, 1, 0, 1, 0, (view(FAST),), (0.5, 1.0), GROUPS)
    with pytest.raises(ConfigError, match=r"width 0\.25 is not one of"):
        decide("jsq-0.25", odd)


def test_least_completion_takes_the_soonest_finish_over_servers_and_widths():
    s = state(view((9, 10, 11, 12)), view((3, 6, 7, 8)), view((1, 2, 3, 4), available=False))
    assert decide("least-completion", s) == (1, 0.25, 16)


def test_slackfit_goes_as_wide_as_the_slack_allows_and_narrows_as_it_shrinks():
    s = [view((10, 30, 50, 70)), view((20, 40, 60, 95))]
    assert decide("slackfit", state(*s, slack_ms=100.0), margin=0.0) == (0, 1.0, 16)
    assert decide("slackfit", state(*s, slack_ms=100.0), margin=0.5) == (0, 0.75, 16)  # 105 > 100
    assert decide("slackfit", state(*s, slack_ms=45.0), margin=0.0) == (0, 0.5, 16)
    assert decide("slackfit", state(*s, slack_ms=5.0), margin=0.0) == (0, 0.25, 16)  # none fits
    late = state(view((10, 30, 50, 70), available=False), *s[1:], slack_ms=-1.0)
    assert decide("slackfit", late) == (1, 0.25, 16)  # late: least completion, available only


def test_infaas_takes_the_cheapest_fitting_width_on_the_least_energy_server():
    gpu = view((8, 10, 12, 14), power_w=250.0)
    cpu = view((30, 60, 90, 120), power_w=30.0)  # 30 ms x 30 W < 8 ms x 250 W
    assert decide("infaas", state(gpu, cpu, slack_ms=100.0), margin=0.0) == (1, 0.25, 16)
    assert decide("infaas", state(gpu, cpu, slack_ms=20.0), margin=0.0) == (0, 0.25, 16)
    floor = decide("infaas", state(gpu, cpu, slack_ms=100.0), margin=0.0, min_width=0.75)
    assert floor == (1, 0.75, 16)  # 90 ms x 30 W < 12 ms x 250 W, and 90 ms fits
    assert decide("infaas", state(gpu, cpu, slack_ms=1.0)) == (0, 0.25, 16)  # none fits


def test_each_remaining_segment_queues_behind_the_backlog_again():
    s = state(view((10, 20, 30, 40), backlog_ms=5.0), segment=0)
    assert [round(t * 1e3, 6) for t in expected_image_done(s, "x")[0]] == [25, 35, 45, 55]
    last = state(view((10, 20, 30, 40), backlog_ms=5.0), segment=3)
    assert [round(t * 1e3, 6) for t in expected_image_done(last, "x")[0]] == [10, 20, 30, 40]


def test_backlog_width_goes_wide_on_a_short_backlog_and_to_the_base_width_past_its_threshold():
    quiet = state(view(SLOW, backlog_ms=15.0), view((9, 8, 7, 6), backlog_ms=16.0))
    assert decide("backlog-width", quiet) == (1, 0.75, 16)  # mean 15.5 ms < 16 ms; 7 < 60 ms
    busy = state(view(SLOW, backlog_ms=16.0), view((9, 8, 7, 6), backlog_ms=16.0))
    assert decide("backlog-width", busy, group_size=4) == (1, 0.5, 4)  # mean 16 ms: not below
    # the mean runs over available servers only, and the soonest finish at the width wins
    down = state(
        view(FAST, backlog_ms=40.0, available=False),
        view((9, 30, 31, 32), backlog_ms=2.0),
        view((9, 20, 30, 40), backlog_ms=2.0),
    )
    assert decide("backlog-width", down) == (2, 0.75, 16)  # 30 < 31 ms at 0.75
    assert decide("backlog-width", down, wide=1.0, base=0.25, threshold_s=0.001) == (1, 0.25, 16)


def test_least_completion_at_width_keeps_its_width_and_picks_the_soonest_finish_not_the_queue():
    s = state(
        view((1, 30, 2, 3), queue=0),  # the shortest queue, but slowest at 0.5
        view((9, 12, 14, 16), queue=4, backlog_ms=3.0),
        view((1, 5, 2, 3), queue=0, available=False),
    )
    assert decide("least-completion-0.5", s) == (1, 0.5, 16)
    assert decide("jsq-0.5", s) == (0, 0.5, 16)  # the queue rule goes where the queue is short
    assert decide("least-completion-0.5", s, width=0.25, group_size=2) == (0, 0.25, 2)
    odd = RouterState(0.0, 1, 0, 1, 0, (view((3, 4)),), (0.25, 1.0), GROUPS)
    with pytest.raises(ConfigError, match=r"width 0\.5 is not one of"):
        decide("least-completion-0.5", odd)


def blocky_view(lone_ms, per_request_ms):
    """A server whose head image alone finishes after ``lone_ms`` per width and a block of
    ``n`` after ``n * per_request_ms``: a device whose batch time grows with the batch."""
    lone_s = tuple(d / 1e3 for d in lone_ms)

    def block(n):
        return lone_s if n == 1 else tuple(n * d / 1e3 for d in per_request_ms)

    return ServerView(
        "s", 0, 50.0, 200.0, 10.0, True, 0.0, 0.0, lone_s, lone_s, predict_block=block
    )


def test_backlog_rules_wait_for_the_block_they_place_not_for_a_lone_request():
    gpu = view((6, 7, 8, 9))  # fixed predictions: the block waits as long as a lone request
    cpu = blocky_view((1, 2, 3, 4), (1, 2, 3, 4))
    crowded = RouterState(0.0, 20, 0, 20, 3, (gpu, cpu), WIDTHS, GROUPS)
    assert decide("least-completion-0.5", crowded) == (0, 0.5, 16)  # 16 x 2 ms > 7 ms
    assert decide("backlog-width", crowded) == (0, 0.75, 16)
    assert decide("least-completion-0.5", crowded, group_size=1) == (1, 0.5, 1)  # alone: 2 < 7
    alone = RouterState(0.0, 1, 0, 1, 3, (gpu, cpu), WIDTHS, GROUPS)  # the FIFO holds one
    assert decide("backlog-width", alone) == (1, 0.75, 16)  # a block of one: 3 < 8 ms
    assert decide("least-completion-0.5", alone) == (1, 0.5, 16)


def test_backlog_width_refuses_widths_out_of_order_or_a_negative_threshold():
    with pytest.raises(ConfigError, match=r"base width 0\.75 must be narrower than wide 0\.5"):
        ROUTERS.create("backlog-width", wide=0.5, base=0.75)
    with pytest.raises(ConfigError, match="threshold_s must be >= 0 seconds"):
        ROUTERS.create("backlog-width", threshold_s=-0.001)
    only_half = RouterState(0.0, 1, 0, 1, 0, (view((3, 4)),), (0.5, 1.0), GROUPS)
    with pytest.raises(ConfigError, match=r"width 0\.75 is not one of"):
        decide("backlog-width", only_half)


@pytest.mark.parametrize(
    "name",
    [
        "backlog-width",
        "constant-best",
        "least-completion",
        "least-completion-0.5",
        "slackfit",
        "infaas",
    ],
)
def test_rules_that_read_predictions_say_so_when_the_cluster_has_none(name, state_factory):
    with pytest.raises(ConfigError, match=f"router {name} needs predicted completion times"):
        ROUTERS.create(name).decide(state_factory())
