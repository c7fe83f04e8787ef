"""Self-healing with a standby: a payload the scrub finds rotten on one side is put back from
the other side's copy once that copy's size and SHA-256 are verified (the contract's Scrub
section); a copy that is rotten there too is never used: the object stays corrupt.

Real processes: a primary and its standby, each with a writer and a worker (so the worker
that serves the reads must hear of the repair), a byte flipped in a payload file on disk.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx

from service.storage.layout import PAYLOADS_DIR, QUARANTINE_DIR
from tests.replication.kit import Factory, start_standby, status, wait_caught_up
from tests.serverproc import ServerProcess

QUIET = {"SERVICE_SCRUB_INTERVAL_DAYS": "3650", "SERVICE_WORKERS": "2"}
BUCKET = "keep"


def payload_file(data_dir: Path, content: bytes) -> Path:
    """The payload file holding exactly ``content`` (bodies in these tests are unique)."""
    for path in (data_dir / PAYLOADS_DIR).rglob("*"):
        if path.is_file() and path.read_bytes() == content:
            return path
    raise AssertionError(f"no payload file in {data_dir} holds that content")


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))


def scrub_now(api: httpx.Client) -> dict[str, Any]:
    """Start a pass and wait for it to end; its document."""
    started = api.post("/system/scrub")
    assert started.status_code == 202, started.text
    deadline = time.monotonic() + 60
    while (doc := api.get("/system/scrub").json())["state"] == "running":
        assert time.monotonic() < deadline, doc
        time.sleep(0.05)
    return dict(doc)


def pair(server_factory: Factory) -> tuple[ServerProcess, ServerProcess, dict[str, bytes]]:
    """A primary holding a few objects (one of them versioned twice) and its caught-up
    standby; the bodies by key."""
    primary = server_factory(**QUIET)
    bodies = {f"o{n}.bin": os.urandom(3000 + 1000 * n) for n in range(3)}
    bodies["big.bin"] = os.urandom(3 * 1024 * 1024 + 11)  # several scrub chunks
    with primary.client() as api:
        created = api.post("/buckets", json={"name": BUCKET, "versioning_enabled": True})
        assert created.status_code == 201, created.text
        assert api.put(f"/buckets/{BUCKET}/objects/o0.bin", content=b"older").is_success
        for key, body in bodies.items():
            assert api.put(f"/buckets/{BUCKET}/objects/{key}", content=body).is_success
        standby = start_standby(server_factory, primary, **QUIET)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            # The standby named where it serves with its feed requests.
            standbys = status(api)["standbys"]
            assert [each["confirmed_sequence"] > 0 for each in standbys] == [True]
    return primary, standby, bodies


def reads(server: ServerProcess, key: str, times: int = 6) -> set[tuple[int, bytes]]:
    """What ``times`` GETs of ``key`` answer (each on a new connection: both processes)."""
    seen = set()
    for _ in range(times):
        with server.client() as api:
            got = api.get(f"/buckets/{BUCKET}/objects/{key}")
            seen.add((got.status_code, got.content if got.status_code == 200 else b""))
    return seen


def quarantined(server: ServerProcess) -> list[str]:
    directory = server.data_dir / QUARANTINE_DIR
    return sorted(os.listdir(directory)) if directory.exists() else []


def test_a_rotten_payload_on_the_primary_is_repaired_from_the_standby(
    server_factory: Factory,
) -> None:
    primary, _standby, bodies = pair(server_factory)
    rotten = payload_file(primary.data_dir, bodies["big.bin"])
    flip_a_byte(rotten)
    with primary.client() as api:
        doc = scrub_now(api)
        assert doc["corrupt"] == [], doc
        [entry] = doc["repaired"]
        standby_id = status(api)["standbys"][0]["id"]
        assert entry["from"] == f"standby:{standby_id}"
        assert (entry["bucket"], entry["key"]) == (BUCKET, "big.bin")
        assert entry["version_id"] and entry["repaired_at"].endswith("Z")
        assert httpx.get(primary.url + "/health").json()["status"] == "ok"
        assert "service_scrub_repaired_objects_total 1.0" in api.get("/metrics").text
        assert rotten.read_bytes() == bodies["big.bin"]
        assert quarantined(primary) == []
        assert reads(primary, "big.bin") == {(200, bodies["big.bin"])}
        for key in ("o0.bin", "o1.bin", "o2.bin"):
            assert reads(primary, key, 2) == {(200, bodies[key])}
        # A later pass finds it whole: still listed as repaired, never corrupt again.
        again = scrub_now(api)
        assert again["corrupt"] == [] and again["repaired"] == doc["repaired"]
    assert "repaired from the standby:" in primary.logs()


def test_a_rotten_payload_on_the_standby_is_repaired_from_the_primary(
    server_factory: Factory,
) -> None:
    primary, standby, bodies = pair(server_factory)
    rotten = payload_file(standby.data_dir, bodies["o1.bin"])
    flip_a_byte(rotten)
    with standby.client() as copy:
        doc = scrub_now(copy)
        assert doc["corrupt"] == [], doc
        assert [(e["key"], e["from"]) for e in doc["repaired"]] == [("o1.bin", "primary")]
        assert rotten.read_bytes() == bodies["o1.bin"]
        assert quarantined(standby) == []
        assert reads(standby, "o1.bin") == {(200, bodies["o1.bin"])}
    # The primary's copy was only read.
    assert payload_file(primary.data_dir, bodies["o1.bin"]).read_bytes() == bodies["o1.bin"]


def test_the_payloads_route_of_a_standby_is_an_administrators(server_factory: Factory) -> None:
    primary, standby, bodies = pair(server_factory)
    payload_id = payload_file(standby.data_dir, bodies["o2.bin"]).name
    path = f"/api/v1/replication/payloads/{payload_id}"
    assert httpx.get(standby.url + path).status_code == 401
    with standby.client() as copy:
        got = copy.get(f"/replication/payloads/{payload_id}")
        assert got.status_code == 200 and got.content == bodies["o2.bin"]
        with primary.client() as api:
            user = api.post("/users", json={"username": "eve", "password": "eve-password-12"})
            assert user.status_code == 201, user.text
            made = api.post("/access-keys", json={"user_id": user.json()["user_id"], "name": "k"})
            assert made.status_code == 201, made.text
            wait_caught_up(api, copy)
        key = made.json()
        eve = httpx.get(standby.url + path, auth=(key["access_key_id"], key["secret_key"]))
        assert eve.status_code == 403, eve.text


def test_rotten_on_both_sides_stays_corrupt_and_is_never_repaired(
    server_factory: Factory,
) -> None:
    primary, standby, bodies = pair(server_factory)
    flip_a_byte(payload_file(primary.data_dir, bodies["o2.bin"]))
    flip_a_byte(payload_file(standby.data_dir, bodies["o2.bin"]))
    with primary.client() as api, standby.client() as copy:
        # The primary's scrub first: the standby still serves its (rotten) copy, which fails
        # the check.
        doc = scrub_now(api)
        assert [e["key"] for e in doc["corrupt"]] == ["o2.bin"] and doc["repaired"] == [], doc
        assert {status for status, _ in reads(primary, "o2.bin", 2)} == {500}
        # Then the standby's: the primary's copy is quarantined there (404).
        doc = scrub_now(copy)
        assert [e["key"] for e in doc["corrupt"]] == ["o2.bin"] and doc["repaired"] == [], doc
        assert {status for status, _ in reads(standby, "o2.bin", 2)} == {500}
        # A pass tries again, and still repairs nothing from an unverified copy.
        doc = scrub_now(api)
        assert [e["key"] for e in doc["corrupt"]] == ["o2.bin"] and doc["repaired"] == []
        assert httpx.get(primary.url + "/health").json()["status"] == "degraded"
    assert "stays corrupt" in primary.logs() and "not the one written" in primary.logs()
    assert "stays corrupt" in standby.logs() and "quarantined too" in standby.logs()
    for server in (primary, standby):
        assert len(quarantined(server)) == 1
