"""A local Slurm says in one line why it cannot start, and refuses any folder it did not create or
that another user could tamper with (its daemons run as root and trust that folder)."""

from __future__ import annotations

import os
import pwd
import stat

import pytest

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm import local, private_dir


def test_missing_slurm_names_slurm_wlm(monkeypatch):
    monkeypatch.setattr(local, "find_binary", lambda name: None if name == "slurmctld" else "/x")
    assert "install the Debian package slurm-wlm" in local.missing_requirements()


def test_missing_client_program_names_slurm_wlm(monkeypatch):
    monkeypatch.setattr(local, "find_binary", lambda name: None if name == "squeue" else "/x")
    assert local.missing_requirements().startswith("squeue not found")


def test_missing_munge_names_munge(monkeypatch):
    monkeypatch.setattr(local, "find_binary", lambda name: None if name == "munged" else "/x")
    assert "install the Debian package munge" in local.missing_requirements()


def test_not_root_says_so(monkeypatch, tmp_path):
    key = tmp_path / "munge.key"
    key.write_text("k")
    monkeypatch.setattr(local, "find_binary", lambda name: "/x")
    monkeypatch.setattr(local, "MUNGE_KEY", key)
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)  # tmp_path stays root's: a safe parent
    assert "needs root" in local.missing_requirements()
    with pytest.raises(HetschedError, match=r"cannot start a local Slurm: .*needs root"):
        local.LocalSlurm(tmp_path / "slurm").start()
    assert not (tmp_path / "slurm").exists()  # nothing created before the requirements hold


def test_unreadable_munge_key_is_a_reason_not_a_crash(monkeypatch):
    """As a non-root user /etc/munge (0700) cannot be looked into: skip, do not raise."""

    class UnreadableKey:
        def exists(self) -> bool:
            raise PermissionError(13, "Permission denied")

        def __str__(self) -> str:
            return "/etc/munge/munge.key"

    monkeypatch.setattr(local, "find_binary", lambda name: "/x")
    monkeypatch.setattr(local, "MUNGE_KEY", UnreadableKey())
    assert "needs root" in local.missing_requirements()


def test_a_root_made_by_someone_else_is_refused(tmp_path):
    """Pre-created (as another user where this test can chown, as root in CI): refused before
    anything runs, with the owner named; its contents are never touched."""
    root = tmp_path / "myslurm"
    root.mkdir()
    planted = root / "slurm.conf"
    planted.write_text("SlurmctldHost=evil\n")
    owner = pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        os.chown(root, pwd.getpwnam("nobody").pw_uid, -1)
        owner = "nobody"
    with pytest.raises(
        HetschedError, match=rf"refusing .*myslurm: it already exists \(owned by {owner}\)"
    ):
        local.LocalSlurm(root).start()
    assert planted.read_text() == "SlurmctldHost=evil\n"


def test_a_symlink_in_the_roots_place_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HetschedError, match="already exists"):
        local.LocalSlurm(tmp_path / "link").start()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(HetschedError, match="already exists"):
        private_dir.create_private_dir(tmp_path / "dangling")


def test_parents_another_user_owns_or_can_write_are_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, no sticky bit
    with pytest.raises(HetschedError, match=r"shared is writable by other users \(mode 777"):
        private_dir.create_private_dir(shared / "slurm")
    shared.chmod(0o777 | stat.S_ISVTX)  # like /tmp: allowed
    assert private_dir.create_private_dir(shared / "slurm") == (shared / "slurm").resolve()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
    else:  # seen from another (non-root) user, this folder belongs to someone else
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(theirs).st_uid + 1)
    with pytest.raises(HetschedError, match=r"theirs belongs to .* who could replace it"):
        private_dir.create_private_dir(theirs / "slurm")
    with pytest.raises(HetschedError, match="does not exist"):
        private_dir.create_private_dir(tmp_path / "no" / "such")


def test_private_files_are_0600_and_never_overwritten(tmp_path):
    folder = private_dir.create_private_dir(tmp_path / "p")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    private_dir.write_private_file(folder / "key", b"secret")
    assert stat.S_IMODE((folder / "key").stat().st_mode) == 0o600
    with pytest.raises(HetschedError, match="already exists"):
        private_dir.write_private_file(folder / "key", b"other")
    (folder / "trap").symlink_to(tmp_path / "target")
    with pytest.raises(HetschedError, match="already exists"):
        private_dir.write_private_file(folder / "trap", b"other")
    assert not (tmp_path / "target").exists() and (folder / "key").read_bytes() == b"secret"
