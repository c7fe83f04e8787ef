"""Sync replication (``SERVICE_REPLICATION=sync``) with real processes: a write is
acknowledged only once a standby holds it, so SIGKILLing the primary under concurrent writes
loses no acknowledged write; with no standby, a write answers 503 ReplicationTimeout after
the timeout (and may be on the primary: retrying it is safe)."""

from __future__ import annotations

import time

from tests.replication.kit import Factory, Writers, start_standby, status, wait_caught_up
from tests.replication.test_standby_async import settled_position

WRITERS = 6


def test_without_a_standby_a_write_times_out(server_factory: Factory) -> None:
    primary = server_factory(SERVICE_REPLICATION="sync", SERVICE_REPLICATION_TIMEOUT="0.5")
    with primary.client() as api:
        assert status(api)["mode"] == "sync"
        created = api.post("/buckets", json={"name": "lonely"})
        assert created.status_code == 503, created.text
        assert created.json()["error"]["code"] == "ReplicationTimeout"
        assert api.get("/buckets/lonely").status_code == 200  # committed on the primary


def test_every_acknowledged_write_survives_the_primary_in_sync_mode(
    server_factory: Factory,
) -> None:
    primary = server_factory(SERVICE_REPLICATION="sync", SERVICE_REPLICATION_TIMEOUT="30")
    standby = start_standby(server_factory, primary)
    with primary.client() as api, standby.client() as copy:
        assert api.post("/buckets", json={"name": "synced"}).status_code == 201
        wait_caught_up(api, copy)
    writers = Writers(primary, "synced", WRITERS, prefix="s", repeat=30)
    acknowledged = writers.acknowledged
    deadline = time.monotonic() + 120
    while len(acknowledged) < 150:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    primary.kill()
    writers.stop()
    with standby.client() as copy:
        settled_position(copy)
        listed = copy.get("/buckets/synced/objects", params={"limit": 1000}).json()
    on_standby = {each["key"]: each["etag"] for each in listed["objects"]}
    missing = {key for key, etag in acknowledged.items() if on_standby.get(key) != etag}
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged writes lost"
