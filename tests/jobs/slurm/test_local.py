"""Why a local Slurm cannot start is said in one line that names the package to install."""

from __future__ import annotations

import pytest

from hetsched.core.errors import HetschedError
from hetsched.jobs.slurm import local


def test_missing_slurm_names_slurm_wlm(monkeypatch):
    monkeypatch.setattr(local, "_binary", lambda name: None if name == "slurmctld" else "/x")
    assert "install the Debian package slurm-wlm" in local.missing_requirements()


def test_missing_munge_names_munge(monkeypatch):
    monkeypatch.setattr(local, "_binary", lambda name: None if name == "munged" else "/x")
    assert "install the Debian package munge" in local.missing_requirements()


def test_not_root_says_so(monkeypatch, tmp_path):
    key = tmp_path / "munge.key"
    key.write_text("k")
    monkeypatch.setattr(local, "_binary", lambda name: "/x")
    monkeypatch.setattr(local, "MUNGE_KEY", key)
    monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    assert "needs root" in local.missing_requirements()
    with pytest.raises(HetschedError, match=r"cannot start a local Slurm: .*needs root"):
        local.LocalSlurm(tmp_path / "slurm").start()


def test_unreadable_munge_key_is_a_reason_not_a_crash(monkeypatch):
    """As a non-root user /etc/munge (0700) cannot be looked into: skip, do not raise."""

    class UnreadableKey:
        def exists(self) -> bool:
            raise PermissionError(13, "Permission denied")

        def __str__(self) -> str:
            return "/etc/munge/munge.key"

    monkeypatch.setattr(local, "_binary", lambda name: "/x")
    monkeypatch.setattr(local, "MUNGE_KEY", UnreadableKey())
    assert "needs root" in local.missing_requirements()
