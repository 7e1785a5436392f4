"""Where the suite decides, once per daemon, whether its integration tests can run here.

A test that drives a real daemon carries ``@pytest.mark.needs_slurm`` or
``@pytest.mark.needs_prometheus`` (module-level ``pytestmark`` is fine). On a machine without the
daemon, or without root where the daemon needs it, every such test is skipped with the reason
below — so ``make test`` passes on a fresh machine. A test marked ``integration`` without naming
its daemon is a collection error: its skip would otherwise depend on someone remembering it.

``.ci/run`` runs the suite a second time as an unprivileged user with the daemons off ``PATH``,
so a test that needs a daemon but lacks the marker fails CI rather than a newcomer's machine.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest

from hetsched.jobs.slurm.local import missing_requirements as slurm_missing


def prometheus_missing() -> str | None:
    """Why a local Prometheus cannot start here (None when it can); names the package."""
    if shutil.which("prometheus") is None:
        return "prometheus not found on PATH: install the Debian package prometheus"
    return None


DAEMON_CHECKS: dict[str, Callable[[], str | None]] = {
    "needs_slurm": slurm_missing,
    "needs_prometheus": prometheus_missing,
}


def pytest_configure(config: pytest.Config) -> None:
    """Registers the daemon markers (pyproject's ``--strict-markers`` needs them declared)."""
    config.addinivalue_line("markers", "needs_slurm: drives a real Slurm; skips without it")
    config.addinivalue_line(
        "markers", "needs_prometheus: drives a real Prometheus; skips without it"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips daemon tests whose daemon is missing; refuses integration tests naming none."""
    reasons: dict[str, str | None] = {}
    unnamed: list[str] = []
    for item in items:
        needed = [marker for marker in DAEMON_CHECKS if item.get_closest_marker(marker)]
        if item.get_closest_marker("integration") and not needed:
            unnamed.append(item.nodeid)
        for marker in needed:
            if marker not in reasons:
                reasons[marker] = DAEMON_CHECKS[marker]()
            reason = reasons[marker]
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
    if unnamed:
        raise pytest.UsageError(
            "integration tests must name their daemon (needs_slurm / needs_prometheus): "
            + ", ".join(unnamed)
        )


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One local Ray session per test module that asks for it (~5-9 s and ~0.9 GB to start).

    Loopback only, so authentication is off (``RAY_AUTH_MODE=disabled``, LOCAL-SERVICES.md) and
    restored afterwards; actors are not niced (as ``start_ray``: niced actors starve on a busy
    CI machine). Skips where Ray is not installed.
    """
    ray = pytest.importorskip("ray")
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
        _system_config={"worker_niceness": 0},
    )
    yield
    ray.shutdown()
    if previous is None:
        del os.environ["RAY_AUTH_MODE"]
    else:
        os.environ["RAY_AUTH_MODE"] = previous
