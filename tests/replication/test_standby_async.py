"""Async replication's promise, with real processes: the standby follows under concurrent
writes, and when the primary dies (SIGKILL), every acknowledged write up to the position
the standby reports is on the standby, byte for byte (writes after it may be missing:
that is what async allows).

Which record a write was is read afterwards from the primary's own event log (each event
carries its journal sequence), with the primary started again on another port, out of the
standby's reach.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.events.test_event_stream import read_events
from tests.replication.kit import (
    Factory,
    Writers,
    everything,
    start_standby,
    status,
    wait_caught_up,
)
from tests.serverproc import free_port

WRITERS = 4


def test_every_write_up_to_the_reported_position_survives_the_primary(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "acked"}).status_code == 201
    standby = start_standby(server_factory, primary)
    writers = Writers(primary, "acked", WRITERS, prefix="w", repeat=40)
    with standby.client() as copy:
        deadline = time.monotonic() + 60
        while status(copy)["applied_sequence"] < 150:  # following while the writes go on
            assert time.monotonic() < deadline
            time.sleep(0.05)
        primary.kill()
        writers.stop()
        position = settled_position(copy)
        on_standby = {each["key"]: each["etag"] for each in all_objects(copy, "acked")}
    primary.port = free_port()  # out of the standby's reach
    primary.start()
    with primary.client() as api:
        events = read_events(api, "acked", len(all_objects(api, "acked")), params={"since": "0"})
    sequence_of = {event["key"]: event["sequence"] for event in events}
    acknowledged = writers.acknowledged
    assert set(acknowledged) <= set(sequence_of)
    kept = [key for key in acknowledged if sequence_of[key] <= position]
    assert len(kept) >= 100
    for key in kept:
        assert on_standby.get(key) == acknowledged[key], key
    # Nothing the standby holds is past its position, or unknown to the primary.
    assert all(sequence_of[key] <= position for key in on_standby)


def all_objects(client: httpx.Client, bucket: str) -> list[dict[str, Any]]:
    """Every object of ``bucket``, page after page (the writers may store over 1,000)."""
    objects: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/buckets/{bucket}/objects", params=params).json()
        objects += page["objects"]
        cursor = page["next_cursor"]
        if cursor is None:
            return objects


def settled_position(copy: httpx.Client) -> int:
    """The standby's applied sequence once it stops moving (its primary is gone)."""
    last, since = -1, time.monotonic()
    while time.monotonic() - since < 2.0:
        now = status(copy)["applied_sequence"]
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)
    return int(last)


def test_a_standby_keeps_what_it_still_needs_on_its_primary(server_factory: Factory) -> None:
    """While a standby is away, its slot keeps the primary's segments and the payloads that
    later records released, so it catches up without a new bootstrap or a lost payload."""
    primary = server_factory(SERVICE_JOURNAL_SEGMENT_BYTES="4096", SERVICE_SNAPSHOT_EVERY="20")
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "slot"}).status_code == 201
        assert api.put("/buckets/slot/objects/a", content=b"first").is_success
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
        standby.stop()
        for n in range(120):  # overwrites release payloads; snapshots would drop segments
            assert api.put(f"/buckets/slot/objects/k{n % 7}", content=b"%d" % n).is_success
        assert api.put("/buckets/slot/objects/a", content=b"second").is_success
        standby.start()
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
            assert status(copy)["last_error"] is None
        assert "bootstrapping" not in standby.logs().split("standby of")[-1]
        assert "quarantined here" not in standby.logs()
