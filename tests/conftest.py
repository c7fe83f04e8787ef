"""Shared fixtures: real server processes on free loopback ports."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.serverproc import ServerProcess

_names = itertools.count()


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
