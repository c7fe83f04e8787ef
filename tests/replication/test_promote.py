"""Promotion (``POST /api/v1/replication/promote``) and epochs, with real server processes:
a promoted standby serves writes and stays a primary across a restart; a primary refuses
the promotion; a former primary comes back as a standby of the new one (refused with one
line when it holds records the new one never had, then ``SERVICE_FOLLOW_RESEED``; following
at once when it does not); a standby never follows an older epoch.
"""

from __future__ import annotations

import os

from tests.replication.kit import Factory, everything, start_standby, status, wait_caught_up
from tests.replication.promotekit import lines_with, promote, repoint, wait_refused
from tests.serverproc import ServerProcess


def primary_and_caught_up_standby(
    server_factory: Factory, key: str
) -> tuple[ServerProcess, ServerProcess]:
    """A primary holding bucket ``bkt`` with one object ``key``, and a standby caught up."""
    old = server_factory()
    with old.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        assert api.put(f"/buckets/bkt/objects/{key}", content=key.encode()).is_success
        new = start_standby(server_factory, old)
        with new.client() as copy:
            wait_caught_up(api, copy)
    return old, new


def test_a_promoted_standby_serves_writes_and_stays_a_primary_across_a_restart(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert status(api)["epoch"] == 1
        assert api.post("/buckets", json={"name": "keep"}).status_code == 201
        before = os.urandom(3000)
        assert api.put("/buckets/keep/objects/before", content=before).is_success
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
    primary.kill()
    promoted = promote(standby)
    assert promoted["role"] == "primary" and promoted["epoch"] == 2, promoted
    body = os.urandom(5000)
    with standby.client() as copy:
        put = copy.put("/buckets/keep/objects/after", content=body)
        assert put.status_code == 200, put.text
        assert copy.get("/buckets/keep/objects/after").content == body
        assert copy.get("/buckets/keep/objects/before").content == before
        again = copy.post("/replication/promote")
        assert again.status_code == 409 and again.json()["error"]["code"] == "InvalidState"
        metrics = copy.get("/metrics").text.splitlines()
        assert "service_replication_standby 0.0" in metrics
        assert "service_replication_standby 1.0" not in metrics
    standby.restart()  # SERVICE_FOLLOW still names the dead primary: ignored
    assert lines_with(standby, "ignores SERVICE_FOLLOW")
    with standby.client() as copy:
        got = status(copy)
        assert got["role"] == "primary" and got["epoch"] == 2, got
        assert copy.put("/buckets/keep/objects/later", content=b"x").status_code == 200
        assert copy.get("/buckets/keep/objects/after").content == body


def test_a_primary_refuses_a_promotion_and_changes_nothing(server_factory: Factory) -> None:
    primary = server_factory()
    with primary.client() as api:
        before = status(api)
        answer = api.post("/replication/promote")
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert error["code"] == "InvalidState" and "primary" in error["message"]
        assert status(api)["last_sequence"] == before["last_sequence"]
        assert status(api)["epoch"] == 1


def test_a_former_primary_with_records_the_new_one_never_had_is_refused_then_reseeded(
    server_factory: Factory,
) -> None:
    old, new = primary_and_caught_up_standby(server_factory, "shared")
    with old.client() as api:
        new.stop()
        for n in range(3):  # records the standby never had
            assert api.put(f"/buckets/bkt/objects/lost{n}", content=b"lost").is_success
        old_last = status(api)["last_sequence"]
    old.stop()
    new.start()
    promoted = promote(new)
    with new.client() as copy:
        assert copy.put("/buckets/bkt/objects/new", content=b"new").status_code == 200
    begun = promoted["last_sequence"]  # the epoch record is the promotion's last record
    repoint(old, new)
    old.start()
    health = wait_refused(old, "diverged")
    line = f"this server's last record is {old_last} (epoch 1), but epoch 2 began at record"
    assert any(line in reason for reason in health["reasons"]), health
    with old.client() as api:
        got = status(api)
        assert got["role"] == "standby" and line in str(got["last_error"])
        assert f"began at record {begun}" in str(got["last_error"])
        assert got["applied_sequence"] == old_last  # nothing applied over its records
        assert api.get("/buckets/bkt/objects/lost0").content == b"lost"
        assert api.get("/buckets/bkt/objects/new").status_code == 404
    logged = lines_with(old, "diverged from")
    assert len(logged) == 1, logged
    old.stop()
    old.start(extra_env={"SERVICE_FOLLOW_RESEED": "1"})
    with old.client() as api, new.client() as copy:
        wait_caught_up(copy, api)
        assert everything(api) == everything(copy)
        assert api.get("/buckets/bkt/objects/lost0").status_code == 404
        assert status(api)["epoch"] == 2
    assert not (old.data_dir / "reseed-previous").exists()


def test_a_former_primary_with_no_extra_record_follows_the_new_one(
    server_factory: Factory,
) -> None:
    old, new = primary_and_caught_up_standby(server_factory, "one")
    old.kill()
    promote(new)
    with new.client() as copy:
        assert copy.put("/buckets/bkt/objects/two", content=b"2").status_code == 200
    repoint(old, new)
    old.start()
    with old.client() as api, new.client() as copy:
        wait_caught_up(copy, api)
        assert everything(api) == everything(copy)
        got = status(api)
        assert got["role"] == "standby" and got["epoch"] == 2 and got["last_error"] is None


def test_a_standby_never_follows_a_primary_of_an_older_epoch(server_factory: Factory) -> None:
    old = server_factory()
    with old.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        new = start_standby(server_factory, old)
        with new.client() as copy:
            wait_caught_up(api, copy)
        promote(new)  # the old primary keeps running, at epoch 1
        third = start_standby(server_factory, new)
        with new.client() as copy, third.client() as other:
            wait_caught_up(copy, other)
            assert status(other)["epoch"] == 2
        third.stop()
        repoint(third, old)
        third.start()
        wait_refused(third, "older than this server's epoch 2")
        with third.client() as other:
            assert "a standby never follows an older epoch" in str(status(other)["last_error"])


def test_every_serving_process_of_a_promoted_standby_takes_writes(
    server_factory: Factory,
) -> None:
    """Two serving processes on each side (the default on two cores): the promotion reaches
    the worker too. Each PUT goes on a new connection, which the kernel hands to either
    process; none is refused as a standby's."""
    primary = server_factory(SERVICE_WORKERS="2")
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        standby = start_standby(server_factory, primary, SERVICE_WORKERS="2")
        with standby.client() as copy:
            wait_caught_up(api, copy)
    primary.kill()
    promoted = promote(standby)
    assert promoted["role"] == "primary" and promoted["epoch"] == 2, promoted
    bodies = {f"k{n}": os.urandom(100 + n) for n in range(24)}
    answered_by = set()
    for key, body in bodies.items():
        with standby.client() as fresh:  # a new connection each
            put = fresh.put(f"/buckets/bkt/objects/{key}", content=body)
            assert put.status_code == 200, put.text
            answered_by.add(put.headers["X-Request-Id"][:8])  # a prefix per process
    assert len(answered_by) == 2, answered_by
    for key, body in bodies.items():
        with standby.client() as fresh:
            assert fresh.get(f"/buckets/bkt/objects/{key}").content == body
    with standby.client() as copy:
        assert status(copy)["role"] == "primary"
