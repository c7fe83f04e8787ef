"""Each serving process listens on its own ``SO_REUSEPORT`` socket (``service.startup``).

New connections reach every process and ``system/performance`` counts each one's requests;
a worker forked again after a death listens again; the port check still refuses a port that
is taken, including by another server of ours whose sockets have ``SO_REUSEPORT`` too. (The
graceful stop with connections on each process: ``test_processes.py``.)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable

import httpx

from tests.procs.prockit import answering_process, wait_for, worker_pids, writer_pid
from tests.serverproc import REPO_ROOT, ServerProcess

ServerFactory = Callable[..., ServerProcess]
CONNECTIONS = 40
"""New connections per check: with two listeners, all on one side has odds of 2 ** -39."""


def prefixes_of_new_connections(server: ServerProcess, count: int = CONNECTIONS) -> list[str]:
    """Which process answered each of ``count`` requests, each on a new connection."""
    seen = []
    for _ in range(count):
        with httpx.Client(base_url=server.api, auth=server.auth, timeout=30.0) as client:
            response = client.get("/buckets")
            assert response.status_code == 200
            seen.append(answering_process(response))
    return seen


def processes_table(server: ServerProcess) -> list[dict[str, object]]:
    with server.client() as api:
        answer = api.get("/system/performance")
    assert answer.status_code == 200
    table: list[dict[str, object]] = answer.json()["processes"]
    return table


def test_new_connections_reach_both_processes_and_each_counts_its_own(
    server: ServerProcess,
) -> None:
    seen = prefixes_of_new_connections(server)
    assert len(set(seen)) == 2
    assert all(seen.count(prefix) >= 5 for prefix in set(seen)), seen
    wait_for(lambda: sum(int(str(row["requests"])) for row in processes_table(server)) >= 40)
    table = processes_table(server)
    roles = {row["pid"]: row["role"] for row in table}
    assert roles == {writer_pid(server): "writer", **dict.fromkeys(worker_pids(server), "worker")}
    assert all(int(str(row["requests"])) >= 5 for row in table), table


def test_a_replaced_worker_listens_again(server_factory: ServerFactory) -> None:
    server = server_factory()
    before = set(prefixes_of_new_connections(server))
    (victim,) = worker_pids(server)
    os.kill(victim, signal.SIGKILL)
    seen: set[int] = set()

    def replaced() -> bool:
        seen.clear()
        seen.update(worker_pids(server))  # one reading, checked and kept
        return len(seen) == 1 and victim not in seen

    wait_for(replaced)
    (replacement,) = seen
    assert worker_pids(server) == {replacement}, server.logs()[-3000:]
    after = prefixes_of_new_connections(server)
    assert len(set(after)) == 2
    assert len(set(after) - before) == 1, "the new worker answered no connection"
    wait_for(lambda: any(row["pid"] == replacement for row in processes_table(server)))
    rows = {row["pid"]: row for row in processes_table(server)}
    assert rows[replacement]["role"] == "worker"
    assert int(str(rows[replacement]["requests"])) >= 1
    assert rows[victim]["role"] == "ended"


def run_service_on(port: int, data_dir: str, workers: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("SERVICE_")
    }
    environment.update(
        PYTHONPATH=str(REPO_ROOT),
        SERVICE_WORKERS=workers,
        SERVICE_HOST="127.0.0.1",
        SERVICE_PORT=str(port),
        SERVICE_DATA_DIR=data_dir,
    )
    return subprocess.run(
        [sys.executable, "-m", "service"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )


def assert_port_refused(done: subprocess.CompletedProcess[str], port: int) -> None:
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert f"port {port}" in lines[0] and "already in use" in lines[0]


def test_a_port_our_processes_listen_on_is_refused_to_a_second_server(
    server: ServerProcess,
) -> None:
    """The second server's sockets would have ``SO_REUSEPORT`` too and could join the first
    one's group; the check binds without it, so the start is refused, writing nothing."""
    for workers in ("2", "1"):
        data_dir = os.path.join(str(server.data_dir) + "-second", workers)
        done = run_service_on(server.port, data_dir, workers)
        assert_port_refused(done, server.port)
        assert not os.path.exists(data_dir)
    assert len(set(prefixes_of_new_connections(server))) == 2  # the first one serves on


def test_a_port_taken_by_a_plain_listener_is_refused_to_several_processes(
    server: ServerProcess,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data_dir = str(server.data_dir) + "-plain"
        assert_port_refused(run_service_on(port, data_dir, "2"), port)
    assert not os.path.exists(data_dir)
