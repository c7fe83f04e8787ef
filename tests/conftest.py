"""Shared fixtures (real server processes on free loopback ports), the crash report, and the
check that no process the tests started outlives the session (``tests.process_leaks``).

The crash suite's tests attach counts with ``record_property`` (``crash_states``,
``acknowledged_checked``, ``acknowledged_lost``, ``kill_cycles``); the terminal-summary hook
below adds them up across every test and xdist worker and prints one line at the end of the
run. It lives here, not in ``tests/crash/``, because under xdist only the root conftest is
loaded by the process that prints the summary.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests import process_leaks
from tests.serverproc import ServerProcess

_names = itertools.count()
_processes = process_leaks.Tracker()

COUNTED = ("crash_states", "kill_cycles", "acknowledged_checked", "acknowledged_lost")
INDEX_FATES = ("index_lost", "index_torn", "index_stale", "index_current", "index_ahead")
"""How the crash matrix's restarts found the (simulated) object index."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    totals = dict.fromkeys(COUNTED, 0)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name in totals:
                    totals[name] += int(value)
    fates = dict.fromkeys(INDEX_FATES, 0)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) == "call":
                for name, value in getattr(report, "user_properties", ()):
                    if name in fates:
                        fates[name] += int(value)
    if any(totals.values()):
        terminalreporter.write_line(
            "crash suite: "
            + ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in totals.items())
        )
    if any(fates.values()):
        terminalreporter.write_line(
            "crash suite, the index at restart: "
            + ", ".join(f"{value} {name[len('index_') :]}" for name, value in fates.items())
        )


LONG_FIRST = (
    "tests/crash/test_kill_restart.py",
    "tests/crash/test_crash_matrix.py",
    "tests/crash/test_standby_matrix.py",
    "tests/crash/test_restore_matrix.py",
    "tests/openapi/test_schemathesis.py",
)
"""The suite's longest files (tens of seconds to minutes per test), run first: xdist hands
each worker its first tests in collection order, so a long test collected late became the
run's tail, with the other workers idle (``make test`` has a 20-minute budget)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable otherwise


def pytest_configure(config: pytest.Config) -> None:
    _processes.install()  # in each xdist worker too: each checks what its own tests started


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _processes.test_starts(item.nodeid)


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fails the session (at its last teardown, after every other session fixture) if a
    process the tests started is still alive, naming each; then kills them."""
    yield
    survivors = _processes.survivors()
    for pid in survivors:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if survivors:
        pytest.fail(
            f"{len(survivors)} processes the tests started outlived the session:\n"
            + "\n".join(survivors.values()),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server shared by the tests that only need a running service (use unique names)."""
    proc = ServerProcess(tmp_path_factory.mktemp("shared") / "data")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Fresh servers with their own data dirs and environment overrides; stopped at the end."""
    started: list[ServerProcess] = []

    def make(start: bool = True, **env: str) -> ServerProcess:
        proc = ServerProcess(tmp_path / f"data{len(started)}", env_overrides=env)
        started.append(proc)
        if start:
            proc.start()
        return proc

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    """An httpx client for the shared server, authenticated as the bootstrap admin."""
    with server.client() as client:
        yield client


@pytest.fixture
def bucket_name() -> str:
    """A bucket name unique within the test session."""
    return f"test-bucket-{next(_names)}"
