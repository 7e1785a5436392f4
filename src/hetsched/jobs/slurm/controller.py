"""Is slurmctld there? A bounded wait with a message, then a one-line error.

Why: with the controller down, every ``squeue`` hangs for Slurm's ``MessageTimeout`` (about
10 s) and prints only "Unspecified error"; a loop that treats that as one more failed scan never
says the controller is gone and, with ``--until-idle``, never ends. ``scontrol ping`` answers at
once (checked on 22.05: ``Slurmctld(primary) at HOST is DOWN``, exit 1), so the adapter pings
before it starts and gives up with :class:`SlurmUnreachableError` (exit 2 in the CLI) when the
controller stays away longer than the caller allows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm.client import SlurmClient, SlurmCommandError

log = logging.getLogger("hetsched.jobs.slurm")


class SlurmUnreachableError(HetschedError):
    """slurmctld did not answer within the allowed time."""


def wait_for_controller(
    client: SlurmClient,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 1.0,
) -> None:
    """Returns once ``scontrol ping`` says the controller is up.

    Raises:
        SlurmUnreachableError: If it is still down after ``timeout_s``.
    """
    deadline = clock() + timeout_s
    warned = False
    while True:
        try:
            client.ping()
            if warned:
                log.info("slurmctld answers again")
            return
        except SlurmCommandError as error:
            if clock() >= deadline:
                raise SlurmUnreachableError(
                    f"slurmctld unreachable for {timeout_s:g} s ({error.message.splitlines()[0]});"
                    " is it running, and does SLURM_CONF point at it?"
                ) from None
            if not warned:
                log.warning(
                    "slurmctld not answering (%s); waiting up to %g s",
                    error.message.splitlines()[0],
                    timeout_s,
                )
                warned = True
        sleep(min(poll_s, max(deadline - clock(), 0.0)))
