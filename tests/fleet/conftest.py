"""Fixtures of the media fleet tests: a Redis, a server sending jobs through it, workers,
the tiny clip of the video tests, all on free loopback ports and killed at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fleet.fleetkit import TEST_LEASE, RedisServer, Worker
from tests.http.videokit import make_clip
from tests.serverproc import ServerProcess


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.kill()


@pytest.fixture
def fleet_server(tmp_path: Path, redis: RedisServer) -> Iterator[Callable[..., ServerProcess]]:
    """Servers sending their jobs through ``redis`` (``SERVICE_MEDIA_LEASE`` short)."""
    started: list[ServerProcess] = []

    def make(**env: str) -> ServerProcess:
        proc = ServerProcess(
            tmp_path / f"data{len(started)}",
            env_overrides={
                "SERVICE_MEDIA_QUEUE": redis.url,
                "SERVICE_MEDIA_LEASE": TEST_LEASE,
                **env,
            },
        )
        started.append(proc)
        proc.start()
        return proc

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def workers(tmp_path: Path, redis: RedisServer) -> Iterator[Callable[..., Worker]]:
    """Worker processes of ``redis``'s queue for a server (started by the caller)."""
    made: list[Worker] = []

    def make(server: ServerProcess, name: str, **env: str) -> Worker:
        worker = Worker(name, redis.url, server.url, tmp_path, dict(env))
        made.append(worker)
        return worker

    yield make
    for worker in made:
        worker.kill()


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4")
