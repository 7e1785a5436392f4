"""Reshaping a loaded trace for an experiment: arrival compression and a fixed window.

Real traces are often too light to tell policies apart (Alibaba GPU 2023 spans 149 days on 1,213
nodes; every policy waits 0 s), so experiments compress arrivals (``simulate --time-scale``,
``train``/``evaluate --arrival-compression``) and replay fixed windows (``simulate --window N
--start K``, e.g. a window a paper published). Every command uses these functions, so the same
option means the same transformation everywhere.
"""

from __future__ import annotations

from hetsched.core.errors import HetschedError
from hetsched.jobs.traces.job_table import JobTable


def compress_arrivals(jobs: JobTable, factor: float) -> JobTable:
    """``jobs`` with submit times divided by ``factor`` (2 = arrivals twice as dense, the same
    jobs in half the time; 1 = unchanged). Run and requested times are kept, so the offered load
    grows by ``factor``.

    Raises:
        HetschedError: If ``factor`` is not a positive finite number.
    """
    if not 0 < factor < float("inf"):
        raise HetschedError(f"arrival compression (time scale) must be > 0, got {factor}")
    if factor == 1.0:
        return jobs
    return jobs.with_columns(submit_time_s=jobs.submit_time_s / factor)


def fixed_window(jobs: JobTable, start: int, size: int) -> JobTable:
    """Jobs ``start`` .. ``start + size - 1`` (rows in submission order), rebased so the first
    submits at t = 0: one window of RLScheduler's protocol, chosen instead of drawn.

    Raises:
        HetschedError: If the window does not lie inside the trace.
    """
    if size < 1 or start < 0 or start + size > len(jobs):
        raise HetschedError(
            f"window of {size} jobs from job {start} does not fit the trace's {len(jobs)} jobs"
            f" (--start must be 0 .. {max(len(jobs) - max(size, 1), 0)})"
        )
    return jobs.window(start, size)
