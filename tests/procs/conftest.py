"""Servers with two serving processes (a writer and a worker) for the tests in this directory.

``server`` and ``server_factory`` are overridden here, so the suites imported from
``tests/http`` (``test_http_objects.py``) run against two processes too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.procs.prockit import wait_for
from tests.serverproc import ServerProcess

TWO = {"SERVICE_WORKERS": "2"}


def start_all(proc: ServerProcess) -> ServerProcess:
    """Start ``proc`` and wait until every serving process is forked: the writer answers
    /health before the supervisor forks the workers, then it logs the line naming them."""
    proc.start()
    if proc.env_overrides.get("SERVICE_WORKERS") != "1":
        wait_for(lambda: "serving processes" in proc.logs())
    return proc


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One two-process server per module (use unique names)."""
    proc = start_all(ServerProcess(tmp_path_factory.mktemp("procs") / "data", env_overrides=TWO))
    yield proc
    proc.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Fresh two-process servers (unless ``SERVICE_WORKERS`` is given); killed at the end."""
    started: list[ServerProcess] = []

    def make(start: bool = True, **env: str) -> ServerProcess:
        proc = ServerProcess(tmp_path / f"data{len(started)}", env_overrides={**TWO, **env})
        started.append(proc)
        if start:
            start_all(proc)
        return proc

    yield make
    for proc in started:
        proc.kill()
