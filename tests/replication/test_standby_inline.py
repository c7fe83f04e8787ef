"""The records answer's inline payloads (docs/replication.md, "The stream"): small payloads
travel inside the records answer that references them, larger ones by the bulk payloads
route; a batch mixing both is applied with every byte; bytes damaged on the wire (either
way) are refused, never applied, and the standby catches up once the wire is clean again.
"""

from __future__ import annotations

import hashlib
import os
import time

from journal.tail import split_frames
from tests.replication.kit import Factory, start_standby, status, wait_caught_up
from tests.replication.proxy import CuttingProxy

INLINE_MAX = 64 << 10
SIZES = (0, 1, 4096, INLINE_MAX, INLINE_MAX + 1, 3 << 20)


def entries(data: bytes) -> dict[str, bytes | None]:
    """Payload entries (the wire format, decoded here independently): None when not held."""
    out: dict[str, bytes | None] = {}
    at = 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 2], "big")
        size = int.from_bytes(data[at + 2 : at + 10], "big", signed=True)
        name = data[at + 10 : at + 10 + length].decode()
        at += 10 + length
        out[name] = data[at : at + size] if size >= 0 else None
        at += max(size, 0)
    return out


def test_the_records_answer_carries_the_small_payloads_it_references(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "mix"}).status_code == 201
        first = status(api)["last_sequence"] + 1
        bodies = {size: os.urandom(size) for size in SIZES}
        for size, body in bodies.items():
            assert api.put(f"/buckets/mix/objects/o{size}", content=body).status_code == 200
        records = api.get(
            "/replication/records",
            params={"from": first, "wait": 0, "inline": 1},
            headers={"X-Standby-Id": "sb_wire"},
        )
        plain = api.get(
            "/replication/records",
            params={"from": first, "wait": 0},
            headers={"X-Standby-Id": "sb_wire"},
        )
    assert records.status_code == 200, records.text
    frames = int(records.headers["X-Frames-Bytes"])
    assert records.content[:frames] == plain.content  # the frames, verbatim
    assert "X-Frames-Bytes" not in plain.headers
    inline = entries(records.content[frames:])
    by_digest = {hashlib.sha256(body).hexdigest(): size for size, body in bodies.items()}
    carried = sorted(by_digest[hashlib.sha256(data or b"").hexdigest()] for data in inline.values())
    assert carried == [size for size in SIZES if size <= INLINE_MAX]


def test_a_batch_mixing_small_and_large_payloads_is_applied_whole(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    standby = start_standby(server_factory, primary)
    bodies = {f"k{n}-{size}": os.urandom(size) for n in range(5) for size in SIZES}
    with primary.client() as api, standby.client() as copy:
        assert api.post("/buckets", json={"name": "mix"}).status_code == 201
        wait_caught_up(api, copy)
    standby.stop()  # the writes below reach it as one batch (its slot keeps them)
    with primary.client() as api:
        for key, body in bodies.items():
            assert api.put(f"/buckets/mix/objects/{key}", content=body).status_code == 200
    standby.start()
    with primary.client() as api, standby.client() as copy:
        wait_caught_up(api, copy)
        for key, body in bodies.items():
            got = copy.get(f"/buckets/mix/objects/{key}")
            assert got.status_code == 200, (key, got.text)
            assert got.content == body, key


def test_payload_bytes_damaged_on_the_wire_are_refused_never_applied(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    proxy = CuttingProxy(primary.port)
    try:
        standby = server_factory(
            SERVICE_FOLLOW=proxy.url,
            SERVICE_FOLLOW_CREDENTIALS=f"{primary.access_key}:{primary.secret_key}",
        )
        with primary.client() as api, standby.client() as copy:
            assert api.post("/buckets", json={"name": "wire"}).status_code == 201
            wait_caught_up(api, copy)
            for key, repeat in (("small", 128), ("large", 8192)):  # inline; by the bulk route
                marker = os.urandom(32)
                proxy.replace = (marker, bytes([marker[0] ^ 1]) + marker[1:])
                before = status(copy)["applied_sequence"]
                body = marker * repeat
                assert api.put(f"/buckets/wire/objects/{key}", content=body).status_code == 200
                deadline = time.monotonic() + 60
                while "SHA-256" not in str(status(copy).get("last_error")):
                    assert time.monotonic() < deadline, status(copy)
                    time.sleep(0.1)
                assert status(copy)["applied_sequence"] == before  # the record never applied
                assert copy.get(f"/buckets/wire/objects/{key}").status_code == 404
                proxy.replace = None
                wait_caught_up(api, copy)
                assert copy.get(f"/buckets/wire/objects/{key}").content == body
                assert status(copy)["last_error"] is None
    finally:
        proxy.close()


def test_the_bulk_payloads_route_streams_many_and_says_which_it_lacks(
    server_factory: Factory,
) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "bulk"}).status_code == 201
        first = status(api)["last_sequence"] + 1
        bodies = [os.urandom(size) for size in (10, 200_000)]
        for n, body in enumerate(bodies):
            assert api.put(f"/buckets/bulk/objects/b{n}", content=body).status_code == 200
        records = api.get(
            "/replication/records",
            params={"from": first, "wait": 0, "inline": 1},
            headers={"X-Standby-Id": "sb_wire"},
        )
        end = int(records.headers["X-Frames-Bytes"])
        frames = split_frames(records.content[:end], first, 16 << 20)
        ids = [str(each.event()["payload_id"]) for each in frames if "payload_id" in each.event()]
        gone = "0" * 32
        answer = api.get("/replication/payloads", params={"id": [*ids, gone]})
        too_many = api.get("/replication/payloads", params={"id": [gone] * 257})
    assert answer.status_code == 200, answer.text
    got = entries(answer.content)
    assert list(got) == [*ids, gone]  # in the order asked
    assert [got[each] for each in ids] == bodies
    assert got[gone] is None
    assert too_many.status_code == 400
    assert too_many.json()["error"]["code"] == "InvalidArgument"
