"""Lower a server's CPU priority, so a front that shares its cores answers promptly.

On Linux niceness belongs to each thread (``os.nice`` changes only the caller's) and a new
thread inherits its creator's. A Ray actor owns its process and lowers every thread of it
(:func:`lower_process_priority`); a server of ``pool: local`` shares the front's process and
lowers only its own executor thread (:func:`lower_thread_priority`), whose batch threads, made
later from it, inherit the niceness. Only lowering: raising needs a privilege.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

LOG = logging.getLogger(__name__)
MAX_NICE = 19
TASKS = Path("/proc/self/task")


def lower_process_priority(nice: int) -> None:
    """Adds ``nice`` to the niceness of every thread of this process (capped at 19); elsewhere
    than Linux (no ``/proc``), ``os.nice``, which is per process there."""
    if not TASKS.is_dir():
        os.nice(nice)
        return
    for task in TASKS.iterdir():
        try:
            _lower(int(task.name), nice)
        except ProcessLookupError:
            continue  # the thread ended meanwhile


def lower_thread_priority(nice: int) -> None:
    """Adds ``nice`` to the calling thread's niceness (capped at 19), and so to the threads it
    starts later. Without per-thread niceness (not Linux) it does nothing and says so: lowering
    the whole process would slow the front it shares."""
    if not TASKS.is_dir():
        LOG.warning("nice %d ignored: per-thread niceness needs Linux", nice)
        return
    _lower(threading.get_native_id(), nice)


def _lower(tid: int, nice: int) -> None:
    now = os.getpriority(os.PRIO_PROCESS, tid)
    os.setpriority(os.PRIO_PROCESS, tid, min(MAX_NICE, now + nice))
