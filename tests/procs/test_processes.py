"""The serving processes' lives: a worker or the writer killed, a graceful stop, and
``SERVICE_WORKERS=1`` running exactly one process as before.

Writes run on a thread while a process is SIGKILLed; every write the service acknowledged
(200) must be readable afterwards, on every process and after a full restart. Answers during
the writer's restart are 200, or 503 with ``Retry-After``; a connection the killed process
held may simply break (as in any crash), never a wrong answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.procs.prockit import (
    answering_process,
    children,
    fresh_get,
    supervisor_pid,
    wait_for,
    worker_pids,
    writer_pid,
)
from tests.serverproc import ServerProcess

ServerFactory = Callable[..., ServerProcess]


class Writes:
    """PUTs on new connections from a thread until stopped; what was acknowledged."""

    def __init__(self, server: ServerProcess, bucket: str) -> None:
        self.server, self.bucket = server, bucket
        self.acknowledged: dict[str, bytes] = {}
        self.statuses: list[int] = []
        self.refused_without_hint = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Writes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def count(self) -> int:
        return len(self.acknowledged)

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            key, body = f"w{number}", os.urandom(100 + number % 5000)
            try:
                with httpx.Client(base_url=self.server.api, auth=self.server.auth) as client:
                    put = client.put(f"/buckets/{self.bucket}/objects/{key}", content=body)
            except httpx.TransportError:
                continue  # the process holding the connection died: unknown, like any crash
            self.statuses.append(put.status_code)
            if put.status_code == 200:
                self.acknowledged[key] = body
            elif put.status_code == 503 and "Retry-After" not in put.headers:
                self.refused_without_hint += 1


def assert_all_present(server: ServerProcess, bucket: str, written: dict[str, bytes]) -> None:
    for key, body in written.items():
        got = fresh_get(server, f"/buckets/{bucket}/objects/{key}")
        assert got.status_code == 200 and got.content == body, key


def make_bucket(server: ServerProcess, name: str) -> None:
    with server.client() as api:
        assert api.post("/buckets", json={"name": name}).status_code == 201


def test_a_killed_worker_is_replaced_and_nothing_acknowledged_is_lost(
    server_factory: ServerFactory,
) -> None:
    server = server_factory()
    make_bucket(server, "workerkill")
    (victim,) = worker_pids(server)
    with Writes(server, "workerkill") as writes:
        wait_for(lambda: writes.count() >= 20)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(worker_pids(server)) == 1 and victim not in worker_pids(server))
        before = writes.count()
        wait_for(lambda: writes.count() >= before + 20)
    assert set(writes.statuses) <= {200, 503} and writes.refused_without_hint == 0
    assert f"worker {victim} ended (signal 9)" in server.logs()
    assert_all_present(server, "workerkill", writes.acknowledged)
    server.restart(crash=True)
    assert_all_present(server, "workerkill", writes.acknowledged)


def test_a_killed_writer_recovers_and_acknowledged_writes_survive(
    server_factory: ServerFactory,
) -> None:
    server = server_factory()
    make_bucket(server, "writerkill")
    victim = writer_pid(server)
    with Writes(server, "writerkill") as writes:
        wait_for(lambda: writes.count() >= 20)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: writer_pid(server) != victim)
        before = writes.count()
        wait_for(lambda: writes.count() >= before + 20)
    assert set(writes.statuses) <= {200, 503} and writes.refused_without_hint == 0
    assert f"the metadata writer ({victim}) ended (signal 9); restarting it" in server.logs()
    assert len(children(supervisor_pid(server))) == 2
    assert_all_present(server, "writerkill", writes.acknowledged)
    server.restart(crash=True)
    assert_all_present(server, "writerkill", writes.acknowledged)


def connections_on_each_process(server: ServerProcess, per_process: int) -> list[httpx.Client]:
    """Keep-alive connections, ``per_process`` accepted by each of the two processes."""
    kept: dict[str, list[httpx.Client]] = {}
    spare: list[httpx.Client] = []
    for _ in range(60):
        client = httpx.Client(base_url=server.api, auth=server.auth, timeout=60.0)
        owner = answering_process(client.get("/buckets"))
        group = kept.setdefault(owner, [])
        (group if len(group) < per_process else spare).append(client)
        if len(kept) == 2 and all(len(g) == per_process for g in kept.values()):
            break
    for client in spare:
        client.close()
    assert len(kept) == 2, "the connections all went to one process"
    return [client for group in kept.values() for client in group]


def test_sigterm_drains_uploads_in_flight_on_every_process(
    server_factory: ServerFactory,
) -> None:
    server = server_factory()
    make_bucket(server, "draining")
    clients = connections_on_each_process(server, 2)
    body = os.urandom(256 * 1024)
    started = threading.Barrier(len(clients) + 1)
    results: list[int] = []

    def upload(index: int, client: httpx.Client) -> None:
        def slow_body() -> Iterator[bytes]:
            yield body[:1024]
            started.wait(30)
            time.sleep(1.0)  # the stop arrives while this body is still coming
            yield body[1024:]

        put = client.put(f"/buckets/draining/objects/up{index}", content=slow_body())
        results.append(put.status_code)
        client.close()

    threads = [
        threading.Thread(target=upload, args=(index, client))
        for index, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    started.wait(30)
    time.sleep(0.3)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(60)
    assert results == [200] * len(clients)
    assert server.process.wait(60) == 0
    server.process = None
    server.start()
    for index in range(len(clients)):
        assert fresh_get(server, f"/buckets/draining/objects/up{index}").content == body


def test_one_worker_runs_one_process_as_before(server_factory: ServerFactory) -> None:
    server = server_factory(SERVICE_WORKERS="1")
    with server.client() as api:
        assert api.post("/buckets", json={"name": "single"}).status_code == 201
        assert api.put("/buckets/single/objects/a", content=b"one").status_code == 200
        assert api.get("/buckets/single/objects/a").content == b"one"
    assert children(supervisor_pid(server)) == set()
    assert not Path(server.data_dir, "run").exists()
    assert "serving processes" not in server.logs()
    assert "metadata writer" not in server.logs()
    assert server.stop() == 0


@pytest.mark.parametrize("workers", ["2", "3"])
def test_the_supervisor_stops_cleanly_with_every_process(
    server_factory: ServerFactory, workers: str
) -> None:
    server = server_factory(SERVICE_WORKERS=workers)
    pids = children(supervisor_pid(server))
    assert len(pids) == int(workers)
    assert f"{workers} serving processes" in server.logs()
    assert server.stop() == 0
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)


def test_event_streams_pass_through_every_process_and_end_with_the_stop(
    server_factory: ServerFactory,
) -> None:
    """The event feed is the writer's: a stream opened on any process gets every event,
    and a stop ends the streams without a traceback in the log."""
    server = server_factory()
    make_bucket(server, "streamed")
    clients = connections_on_each_process(server, 1)
    seen: list[str] = []
    lock = threading.Lock()
    opened = threading.Barrier(len(clients) + 1)

    def listen(client: httpx.Client) -> None:
        """Read until the server ends the stream (the stop)."""
        with (
            contextlib.suppress(httpx.TransportError),
            client.stream("GET", "/buckets/streamed/events") as stream,
        ):
            opened.wait(30)
            for line in stream.iter_lines():
                if line.startswith("data:") and '"object.created"' in line:
                    with lock:
                        seen.append(line)

    threads = [threading.Thread(target=listen, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    opened.wait(30)
    with server.client() as api:
        assert api.put("/buckets/streamed/objects/e", content=b"event").status_code == 200
    wait_for(lambda: len(seen) == len(clients))
    assert server.stop() == 0
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "a stream outlived the server"
    assert "Traceback" not in server.logs()
