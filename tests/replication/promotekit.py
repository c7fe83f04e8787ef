"""Promotion tests' kit: promote a standby, point a server at another primary, wait for a
refusal."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.replication.kit import standby_env
from tests.serverproc import ServerProcess


def promote(server: ServerProcess) -> dict[str, Any]:
    """``POST /replication/promote``: the status it answers (asserting 200)."""
    with server.client() as api:
        answer = api.post("/replication/promote")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def repoint(server: ServerProcess, primary: ServerProcess, **more: str) -> None:
    """From its next start, ``server`` is a standby of ``primary``."""
    server.env_overrides = {**server.env_overrides, **standby_env(primary, **more)}


def wait_refused(server: ServerProcess, words: str, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until ``/health`` names a reason containing ``words``; the health document."""
    deadline = time.monotonic() + timeout
    while True:
        health = httpx.get(server.url + "/health").json()
        if any(words in reason for reason in health.get("reasons", [])):
            return dict(health)
        assert time.monotonic() < deadline, health
        time.sleep(0.1)


def lines_with(server: ServerProcess, words: str) -> list[str]:
    return [line for line in server.logs().splitlines() if words in line]
