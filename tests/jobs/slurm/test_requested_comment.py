"""The requested-time comment: anything but a plain decimal inside the limit's last minute is
refused with a reason, and the caller keeps the time limit."""

from __future__ import annotations

import math

import pytest

from hetsched.jobs.slurm.requested_comment import MAX_UNLIMITED_S, read_requested_comment

KEY = "hetsched:requested_s="


@pytest.mark.parametrize(
    ("comment", "limit_s", "expected"),
    [
        (KEY + "25.000", 60.0, 25.0),
        (KEY + "60", 60.0, 60.0),
        ("note; " + KEY + "12.5 more", 60.0, 12.5),
        (KEY + "119.5", 120.0, 119.5),
        (KEY + "3600", math.inf, 3600.0),
    ],
)
def test_plain_claims_inside_the_limit_are_accepted(comment, limit_s, expected):
    assert read_requested_comment(comment, limit_s).requested_s == expected
    assert read_requested_comment(comment, limit_s).problem is None


@pytest.mark.parametrize(
    "value",
    [
        "-",
        "-5",
        "nan",
        "NaN",
        "inf",
        "1e3",
        "1_0",
        "\u0661\u0662",  # Arabic-Indic digits, which float() would accept
        "\uff11\uff12",  # fullwidth digits
        "12.5x",
        "",
        "9" * 10_000,
        "0x10",
        " 5",
    ],
)
def test_malformed_claims_are_refused(value):
    reading = read_requested_comment(KEY + value, 60.0)
    assert reading.requested_s is None and "plain decimal" in reading.problem


@pytest.mark.parametrize(
    ("value", "limit_s"),
    [("0", 60.0), ("0.0", 60.0), ("61", 60.0), ("30", 120.0), ("1", 3600.0), ("999999999", 60.0)],
)
def test_claims_outside_the_limits_last_minute_are_refused(value, limit_s):
    reading = read_requested_comment(KEY + value, limit_s)
    assert reading.requested_s is None and "outside" in reading.problem


def test_unlimited_jobs_are_capped():
    reading = read_requested_comment(KEY + str(int(MAX_UNLIMITED_S) + 1), math.inf)
    assert reading.requested_s is None and "outside" in reading.problem


def test_no_marker_is_no_claim():
    assert read_requested_comment("x" * 10_000, 60.0) == (read_requested_comment("", 60.0))
    assert read_requested_comment("", 60.0).problem is None
