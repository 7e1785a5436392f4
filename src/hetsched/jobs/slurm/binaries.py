"""One lookup of Slurm's and munge's programs, shared by the daemons and the client.

Why one: the daemons live in ``/usr/sbin``, which an ordinary user's ``PATH`` often lacks, while
the client commands live in ``/usr/bin``. When the daemon starter searched ``PATH`` plus the
system folders and the client searched ``PATH`` only, a machine with Slurm off ``PATH`` started
daemons its client could not reach (and tests hung instead of skipping). Both now ask
:func:`find_binary`, which searches ``PATH`` first and then :data:`SYSTEM_DIRS`.
"""

from __future__ import annotations

import os
import shutil

#: Folders searched after ``PATH`` (where Debian's slurm-wlm and munge install their programs).
SYSTEM_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin")


def find_binary(name: str) -> str | None:
    """The full path of program ``name`` (``PATH`` first, then :data:`SYSTEM_DIRS`), or None."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *SYSTEM_DIRS])
    return shutil.which(name, path=search)
