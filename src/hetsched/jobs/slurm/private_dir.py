"""A folder only this process's user can touch, for a private Slurm's keys, configs and state.

Why: a local Slurm runs as root and reads its ``slurm.conf``, its munge key copy and its state
from one folder. If that folder, or a folder above it, belongs to or is writable by another user,
that user can swap the configuration (and so run code as root) or read the key. So the folder is
created here, atomically (``mkdir`` fails if anything already has the name), with mode 0700, and
only under parents that no other user can rename entries in; every file in it is created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, so a file that appeared meanwhile is an error,
never overwritten or followed.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from hetsched.core.errors import HetschedError


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def check_safe_parents(folder: Path) -> Path:
    """``folder`` with its parent's symlinks resolved, refused if another user could replace it
    through a folder above it.

    Each folder from the resolved parent up to ``/`` must belong to this user or root, and may be
    writable by others only with the sticky bit set (as ``/tmp`` is). Callers use the returned
    path from then on, so a symlink above it that someone swaps later changes nothing.

    Raises:
        HetschedError: Naming the folder and its owner or mode.
    """
    me = os.geteuid()
    try:
        parent = folder.parent.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise HetschedError(f"{folder.parent} does not exist; create it first") from None
    for ancestor in (parent, *parent.parents):
        info = ancestor.stat()
        if info.st_uid not in (0, me):
            raise HetschedError(
                f"refusing {folder}: {ancestor} belongs to {_owner_name(info.st_uid)},"
                " who could replace it"
            )
        others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if others_write and not info.st_mode & stat.S_ISVTX:
            raise HetschedError(
                f"refusing {folder}: {ancestor} is writable by other users"
                f" (mode {stat.S_IMODE(info.st_mode):o}, no sticky bit)"
            )
    return parent / folder.name


def _exists_error(folder: Path) -> HetschedError:
    info = folder.lstat()
    return HetschedError(
        f"refusing {folder}: it already exists (owned by {_owner_name(info.st_uid)}); a local"
        " Slurm only uses a folder it creates itself: remove it or pick a new path"
    )


def check_new_private_dir(folder: Path) -> Path:
    """``folder`` resolved as :func:`check_safe_parents` does, refused if the name is taken.

    Raises:
        HetschedError: If a parent is unsafe or anything (even a dangling symlink) has the name.
    """
    folder = check_safe_parents(folder)
    if os.path.lexists(folder):
        raise _exists_error(folder)
    return folder


def create_private_dir(folder: Path) -> Path:
    """Creates ``folder`` (mode 0700) under safe parents and returns its resolved path; an
    existing one is refused (also one that appears between the check and the ``mkdir``).

    Raises:
        HetschedError: If the name exists already (whoever made it) or a parent is unsafe.
    """
    folder = check_new_private_dir(folder)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        raise _exists_error(folder) from None
    os.chmod(folder, 0o700)  # whatever the umask
    return folder


def write_private_file(path: Path, data: bytes) -> None:
    """Creates ``path`` with mode 0600 and writes ``data``; an existing path (even a dangling
    symlink) is an error, never overwritten or followed.

    Raises:
        HetschedError: If the path exists.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        raise HetschedError(f"refusing to write {path}: it already exists") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
