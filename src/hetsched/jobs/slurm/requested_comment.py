"""The optional, bounded ``hetsched:requested_s=`` override of a job's requested time.

Why it exists: Slurm keeps time limits in whole minutes, too coarse for the scaled jobs of a few
seconds that :mod:`.workload` submits, so the submitter writes the finer requested time into the
job comment. Why it is off by default and bounded: the comment is set by the job's owner, so any
user could claim ``requested_s=0`` and jump the queue under SJF-like policies. The adapter reads
it only when told to trust it (``--trust-requested-comment``), and even then a claim is accepted
only as a refinement of the minute the time limit already names: ``limit - 60 s < value <=
limit`` (for a job without a limit, ``0 < value <=`` :data:`MAX_UNLIMITED_S`). A claim outside
that band, or anything that is not a plain ASCII decimal (negative, NaN, ``inf``, exponents,
unicode digits, a 10 kB number), is ignored with a reason, and the time limit stands.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: The marker the submitter writes and the adapter looks for.
COMMENT_KEY = "hetsched:requested_s="
#: A plain decimal number of seconds, ASCII digits only, ending the comment or followed by a
#: separator; at most 9 integer and 6 fractional digits (over 30 years).
COMMENT_VALUE = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,6})?)(?=$|[\s,;])", re.ASCII)
#: Width of the band below the time limit a claim may refine (Slurm's limits are whole minutes).
LIMIT_RESOLUTION_S = 60.0
#: Largest claim accepted for a job without a time limit.
MAX_UNLIMITED_S = 365.0 * 86_400.0


@dataclass(frozen=True, slots=True)
class CommentReading:
    """What a job comment says about the requested time.

    Attributes:
        requested_s: The accepted claim (None when there is none or it was refused).
        problem: Why a claim present in the comment was refused (None when accepted or absent).
    """

    requested_s: float | None
    problem: str | None


def read_requested_comment(comment: str, time_limit_s: float) -> CommentReading:
    """The requested time a comment claims, if it is well-formed and within the bounds above."""
    start = comment.find(COMMENT_KEY)
    if start < 0:
        return CommentReading(None, None)
    match = COMMENT_VALUE.match(comment, start + len(COMMENT_KEY))
    if match is None:
        return CommentReading(None, "value is not a plain decimal number of seconds")
    value = float(match.group(1))
    if math.isfinite(time_limit_s):
        lowest = max(time_limit_s - LIMIT_RESOLUTION_S, 0.0)
        highest = time_limit_s
    else:
        lowest, highest = 0.0, MAX_UNLIMITED_S
    if not lowest < value <= highest:
        return CommentReading(
            None, f"{value:g} s is outside ({lowest:g}, {highest:g}] s allowed by the time limit"
        )
    return CommentReading(value, None)
