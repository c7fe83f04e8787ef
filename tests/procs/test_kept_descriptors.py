"""A worker's kept payload descriptors let go of payloads the writer removed.

A worker keeps the descriptors of payloads it read (``service.storage.descriptors``); the
writer removes a deleted object's payload file. The worker learns of it only as a moved
index sequence, and must then close its descriptor, or the removed file's blocks stay
allocated until the descriptor happens to be evicted. Seen from outside, as an operator would:
the worker's ``/proc/<pid>/fd`` links.
"""

from __future__ import annotations

import os

import httpx

from tests.procs.prockit import fresh_get, wait_for, worker_pids
from tests.serverproc import ServerProcess


def payload_links(pid: int, server: ServerProcess) -> set[str]:
    """Where the process's open descriptors under the data dir's ``payloads/`` point (a
    removed file's link ends in `` (deleted)``)."""
    root = str(server.data_dir / "payloads") + os.sep
    found = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(root):
            found.add(target)
    return found


def test_a_payload_deleted_through_the_writer_is_let_go_by_the_worker(
    server: ServerProcess,
) -> None:
    (worker,) = worker_pids(server)
    before = payload_links(worker, server)
    path = "/buckets/kept-fds/objects/big.bin"
    body = os.urandom(300_000)
    with server.client() as api:
        assert api.post("/buckets", json={"name": "kept-fds"}).status_code == 201
        assert api.put(path, content=body).status_code == 200

        def worker_keeps_it() -> bool:
            got = fresh_get_range(server, path)
            assert got.status_code == 206 and got.content == body[100:200]
            return bool(payload_links(worker, server) - before)

        wait_for(worker_keeps_it)
        (kept,) = payload_links(worker, server) - before
        assert api.delete(path).status_code == 204
        wait_for(lambda: not os.path.exists(kept))  # the writer removed the file

        def worker_let_go() -> bool:
            assert fresh_get(server, "/buckets/kept-fds/objects").status_code == 200
            return not {kept, kept + " (deleted)"} & payload_links(worker, server)

        wait_for(worker_let_go, timeout=10.0)


def fresh_get_range(server: ServerProcess, path: str) -> httpx.Response:
    """A ranged GET on a new connection (read through a kept descriptor)."""
    with httpx.Client(base_url=server.api, auth=server.auth, timeout=30.0) as client:
        return client.get(path, headers={"Range": "bytes=100-199"})
