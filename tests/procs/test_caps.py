"""The per-user cap on open multipart sessions holds for the service, not per process.

Every process forwards ``multipart/init`` to the writer (``service.procs.forward``), whose
reservations count every creation in flight; a cap checked in each process would let one
creation per process past it when they race.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from service.limits.caps import MAX_OPEN_UPLOADS_PER_USER
from tests.procs.prockit import answering_process
from tests.serverproc import ServerProcess

RACERS = 16
ROOM = 5
"""Sessions left under the cap when the racers start."""


def test_racing_creations_on_both_processes_stop_at_the_cap(server: ServerProcess) -> None:
    with server.client() as admin:
        assert admin.post("/buckets", json={"name": "capped-everywhere"}).status_code == 201
    body = {"bucket": "capped-everywhere", "key": "k"}

    with httpx.Client(base_url=server.api, auth=server.auth, timeout=60.0) as api:

        def init(_: int) -> int:
            return api.post("/multipart/init", json=body).status_code

        with ThreadPoolExecutor(8) as pool:
            filled = list(pool.map(init, range(MAX_OPEN_UPLOADS_PER_USER - ROOM)))
    assert filled.count(201) == MAX_OPEN_UPLOADS_PER_USER - ROOM

    clients = [
        httpx.Client(base_url=server.api, auth=server.auth, timeout=60.0) for _ in range(RACERS)
    ]
    owners = {answering_process(client.get("/buckets")) for client in clients}
    assert len(owners) == 2, "the racers' connections all went to one process"
    start = threading.Barrier(RACERS)

    def race(client: httpx.Client) -> int:
        start.wait(30)
        return client.post("/multipart/init", json=body).status_code

    with ThreadPoolExecutor(RACERS) as pool:
        statuses = list(pool.map(race, clients))
    for client in clients:
        client.close()
    assert statuses.count(201) == ROOM, statuses
    assert statuses.count(409) == RACERS - ROOM
    with server.client() as api:
        listed = api.get("/multipart", params={"bucket": "capped-everywhere", "limit": 1000})
    assert len(listed.json()["uploads"]) == MAX_OPEN_UPLOADS_PER_USER
