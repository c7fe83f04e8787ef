"""A bucket's identity (``bucket_id``) outlives its name: given at creation, the same in every
serving process, across restarts, SIGKILLs and snapshots, carried by its events, and derived
the same way every time for a bucket created before identities existed (docs/events.md,
"Bucket identity")."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx

from journal import Journal, JournalOptions
from service.meta import legacy_bucket_id
from tests.events.streamkit import Watch, start_servers
from tests.serverproc import ServerProcess

BUCKET_ID = re.compile(r"^bkt_[0-9a-f]{24}$")


def obj(bucket: str, key: str) -> str:
    return f"/buckets/{bucket}/objects/{quote(key)}"


def bucket_id(api: httpx.Client, name: str) -> str:
    response = api.get(f"/buckets/{name}")
    assert response.status_code == 200, response.text
    return str(response.json()["bucket_id"])


def test_a_bucket_gets_an_identity_that_a_recreated_bucket_does_not_share(
    api: httpx.Client, bucket_name: str
) -> None:
    created = api.post("/buckets", json={"name": bucket_name})
    assert created.status_code == 201
    first = created.json()["bucket_id"]
    assert BUCKET_ID.match(first), first
    assert bucket_id(api, bucket_name) == first
    listed = [b for b in api.get("/buckets").json()["buckets"] if b["name"] == bucket_name]
    assert [b["bucket_id"] for b in listed] == [first]
    assert api.delete(f"/buckets/{bucket_name}").status_code == 204
    again = api.post("/buckets", json={"name": bucket_name}).json()["bucket_id"]
    assert BUCKET_ID.match(again) and again != first


def test_the_identity_survives_restarts_kills_and_snapshots_in_every_process(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(start=False, SERVICE_WORKERS="2", SERVICE_SNAPSHOT_EVERY="3")
    start_servers(proc)
    with proc.client() as api:
        ids = {}
        for name in ("ident-a", "ident-b", "ident-c", "ident-d"):
            ids[name] = api.post("/buckets", json={"name": name}).json()["bucket_id"]
            api.put(obj(name, "k"), content=b"x")
    for restart in (proc.stop, proc.kill):
        restart()
        start_servers(proc)
        for _ in range(6):  # new connections: each may land on another process
            with proc.client() as api:
                assert {name: bucket_id(api, name) for name in ids} == ids


def test_a_bucket_journaled_without_an_identity_gets_the_derived_one_everywhere(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A data dir written before identities: its creation record has none. Every start, and
    every process, derives the same one from the name and the creation time."""
    proc = server_factory(SERVICE_WORKERS="2")
    with proc.client() as api:
        owner = api.get("/users").json()["users"][0]["user_id"]
    proc.stop()
    at = 1_700_000_000_123
    append_records(
        proc.data_dir / "journal",
        [
            {
                "type": "BucketCreated",
                "name": "from-the-past",
                "owner": owner,
                "quota_bytes": None,
                "versioning_enabled": False,
                "tags": {},
                "at": at,
            }
        ],
    )
    expected = legacy_bucket_id("from-the-past", at)
    assert BUCKET_ID.match(expected)
    for restart in (None, proc.kill, proc.stop):
        if restart is not None:
            restart()
        start_servers(proc)
        for _ in range(6):
            with proc.client() as api:
                assert bucket_id(api, "from-the-past") == expected
    with proc.client() as api:
        api.put(obj("from-the-past", "k"), content=b"x")
    with Watch(proc.api, "from-the-past", auth=proc.auth, params={"since": "0"}) as watch:
        (event,) = watch.wait_events(1)
    assert event["bucket_id"] == expected and event["key"] == "k"


def append_records(journal_dir: Path, records: list[dict[str, object]]) -> None:
    """Append ``records`` to a stopped server's journal, as a server would have."""

    async def run() -> None:
        journal = Journal.open(str(journal_dir), JournalOptions(durability="strict"))
        for _ in journal.replay():
            pass
        for record in records:
            await journal.append(record)
        await journal.close()

    asyncio.run(run())


def test_an_event_log_written_before_identities_replays_only_the_current_bucket(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Event log lines without ``bucket_id`` (an older log) belong to the bucket of their name
    created at or before their time: a re-created bucket never replays its predecessor's."""
    proc = server_factory(SERVICE_EVENTS_SEGMENT_EVENTS="2")
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "old-log"}).status_code == 201
        for key in ("first-0", "first-1", "first-2"):
            api.put(obj("old-log", key), content=b"x")
        assert api.delete("/buckets/old-log", params={"force": "true"}).status_code == 204
        current = api.post("/buckets", json={"name": "old-log"}).json()["bucket_id"]
        api.put(obj("old-log", "second-0"), content=b"x")
    proc.stop()
    lines = 0
    for path in sorted((proc.data_dir / "events").glob("*.events")):
        kept = []
        for line in path.read_bytes().splitlines():
            doc = json.loads(line)
            assert doc.pop("bucket_id")
            kept.append(json.dumps(doc, separators=(",", ":")).encode())
            lines += 1
        path.write_bytes(b"".join(line + b"\n" for line in kept))
    assert lines == 4
    start_servers(proc)
    with proc.client() as api:
        api.put(obj("old-log", "second-1"), content=b"x")
    with Watch(proc.api, "old-log", auth=proc.auth, params={"since": "0"}) as watch:
        events = watch.wait_events(2)
    assert [e["key"] for e in events] == ["second-0", "second-1"]
    assert {e["bucket_id"] for e in events} == {current}
