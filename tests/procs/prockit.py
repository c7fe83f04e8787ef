"""Helpers for the serving-process tests: which process is which, and who answered.

The supervisor logs ``the metadata writer is process N`` each time it forks a writer and
``supervisor N`` on its listening line; every other child is a worker. A response's
``X-Request-Id`` starts with a random prefix each process draws for itself, so the set of
prefixes seen tells how many processes answered.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

import httpx

from tests.serverproc import ServerProcess

WRITER_LINE = re.compile(r"the metadata writer is process (\d+)")
PREFIX_CHARS = 8


def children(pid: int) -> set[int]:
    """Live children of ``pid`` (from /proc)."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(name))
    return found


def supervisor_pid(server: ServerProcess) -> int:
    assert server.process is not None
    return server.process.pid


def writer_pid(server: ServerProcess) -> int:
    """The current writer (the last one the supervisor forked)."""
    pids = WRITER_LINE.findall(server.logs())
    assert pids, server.logs()
    return int(pids[-1])


def worker_pids(server: ServerProcess) -> set[int]:
    return children(supervisor_pid(server)) - {writer_pid(server)}


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def answering_process(response: httpx.Response) -> str:
    """Which serving process answered (its request-id prefix)."""
    return response.headers["X-Request-Id"][:PREFIX_CHARS]


def fresh_get(server: ServerProcess, path: str) -> httpx.Response:
    """GET on a new connection (the kernel picks the process that accepts it)."""
    with httpx.Client(base_url=server.api, auth=server.auth, timeout=30.0) as client:
        return client.get(path)
