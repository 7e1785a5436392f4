"""Admission control on its own: bounded images in system, deadlines against the busy-time rate."""

from __future__ import annotations

import pytest

from hetsched.slim.serving.admission import AdmissionController, ThroughputEstimate
from hetsched.slim.serving.images import RequestError


def test_rate_counts_only_busy_time():
    controller = AdmissionController(100)
    controller.admit(0.0, 10, servers_up=1, deadline_s=None)
    controller.release(1.0, 10, completed=True)  # 10 images in 1 busy second
    controller.admit(60.0, 10, servers_up=1, deadline_s=None)  # after a minute of idling
    controller.release(61.0, 10, completed=True)
    assert controller.throughput.images_per_s == pytest.approx(10.0)


def test_deadline_shorter_than_the_expected_wait_is_refused_with_429():
    controller = AdmissionController(100)
    controller.admit(0.0, 10, servers_up=1, deadline_s=None)
    controller.release(1.0, 10, completed=True)  # 10 images/s
    controller.admit(2.0, 20, servers_up=1, deadline_s=None)  # 2 s of work queued
    controller.admit(2.0, 1, servers_up=1, deadline_s=5.0)  # fits
    with pytest.raises(RequestError) as caught:
        controller.admit(2.0, 1, servers_up=1, deadline_s=1.0)
    assert (caught.value.status, caught.value.reason) == (429, "deadline_unmeetable")
    assert "about 2.200 s" in str(caught.value)  # (21 queued + 1) / 10 per s
    assert controller.images_in_system == 21  # the refused image took no room


def test_full_system_is_refused_with_429_and_no_server_with_503():
    controller = AdmissionController(8)
    controller.admit(0.0, 8, servers_up=2, deadline_s=None)
    with pytest.raises(RequestError) as full:
        controller.admit(0.0, 1, servers_up=2, deadline_s=None)
    assert (full.value.status, full.value.reason) == (429, "queue_full")
    assert "limit of 8" in str(full.value)
    controller.release(0.5, 8, completed=False)
    with pytest.raises(RequestError) as down:
        controller.admit(0.5, 1, servers_up=0, deadline_s=None)
    assert (down.value.status, down.value.reason) == (503, "no_server")


def test_estimate_smooths_towards_the_new_rate():
    estimate = ThroughputEstimate(half_life_s=1.0)
    estimate.record(10, 1.0)
    estimate.record(20, 1.0)
    assert estimate.images_per_s == pytest.approx(15.0)  # half of the old rate kept after 1 s


def test_deadline_below_the_fastest_image_ever_is_refused_with_422():
    controller = AdmissionController(100)
    assert controller.check(1, servers_up=1, deadline_s=0.001) is None  # nothing known yet
    controller.observe_latency(0.030)
    controller.observe_latency(0.020)
    controller.observe_latency(0.050)
    refusal = controller.check(1, servers_up=1, deadline_s=0.015)
    assert refusal is not None and (refusal.status, refusal.reason) == (422, "deadline_too_short")
    assert "0.020 s" in str(refusal)
    assert controller.check(1, servers_up=1, deadline_s=0.5) is None


def test_an_empty_system_never_refuses_for_its_rate_estimate_alone():
    """A rate estimate gone low (many images dropped) must not lock the server out for good:
    with nothing queued, only a completion could correct it."""
    controller = AdmissionController(100)
    controller.admit(0.0, 1, servers_up=1, deadline_s=None)
    controller.release(10.0, 1, completed=True)  # 0.1 images/s
    controller.admit(10.0, 1, servers_up=1, deadline_s=0.5)  # 10 s expected, but nothing queued
    with pytest.raises(RequestError) as caught:
        controller.admit(10.0, 1, servers_up=1, deadline_s=0.5)
    assert caught.value.reason == "deadline_unmeetable"
