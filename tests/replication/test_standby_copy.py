"""A standby of a populated primary: bootstrap, then the same reads on both, then following.

Real server processes: the primary, then a standby started on an empty data dir. Everything
a client reads (listings, versions, users, keys, rules, webhooks, every version's bytes) is
the same on both; presigned URLs and share links made on the primary work on the standby.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from service.replication.feed import BOOTSTRAP_SNAPSHOT_BEHIND
from tests.http.videokit import make_clip, play_hls
from tests.replication.kit import (
    Factory,
    everything,
    populate,
    start_standby,
    status,
    wait_caught_up,
)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4")


def test_a_bootstrapped_standby_reads_like_its_primary(
    server_factory: Factory, clip: bytes, tmp_path: Path
) -> None:
    primary = server_factory()
    with primary.client() as api:
        made = populate(api, clip)
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
            whole = copy.get("/buckets/photos/objects/parts.bin")
            assert whole.content == made["multipart"]
            ranged = copy.get("/buckets/photos/objects/big.bin", headers={"Range": "bytes=10-99"})
            assert ranged.status_code == 206
            assert ranged.content == api.get("/buckets/photos/objects/big.bin").content[10:100]
            # Made on the primary, honoured by the standby (the same signing secret).
            signed = api.post(
                "/presign", json={"bucket": "photos", "key": "p03.bin", "method": "GET"}
            ).json()["url"]
            on_standby = signed.replace(primary.url, standby.url)
            assert on_standby != signed
            assert httpx.get(on_standby).content == httpx.get(signed).content
            hls = made["share"]["hls_url"].replace(primary.url, standby.url)
            assert play_hls(hls)
            # The new key works on the standby too.
            key = made["key"]
            auth = (key["access_key_id"], key["secret_key"])
            assert httpx.get(standby.api + "/buckets", auth=auth).status_code == 200
            got = status(copy)
            assert got["role"] == "standby"
            assert got["lag"]["records"] == 0
            mine = status(api)["standbys"]
            assert [each["confirmed_sequence"] for each in mine] == [got["applied_sequence"]]


def test_a_standby_follows_writes_as_they_commit(server_factory: Factory) -> None:
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "live"}).status_code == 201
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            for n in range(30):
                assert api.put(f"/buckets/live/objects/k{n}", content=b"x" * n).is_success
            assert api.delete("/buckets/live/objects/k3").status_code == 204
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)


def test_a_stopped_standby_started_without_follow_serves_as_a_primary(
    server_factory: Factory,
) -> None:
    """The manual failover docs/replication.md describes (until promotion exists)."""
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "handover"}).status_code == 201
        assert api.put("/buckets/handover/objects/a", content=b"from the primary").is_success
        standby = start_standby(server_factory, primary)
        with standby.client() as copy:
            wait_caught_up(api, copy)
            expected = everything(api)
    primary.kill()
    standby.stop()
    standby.env_overrides = {}
    standby.start()
    with standby.client() as new:
        assert everything(new) == expected
        assert status(new)["role"] == "primary"
        assert new.put("/buckets/handover/objects/b", content=b"new").is_success
        assert new.get("/buckets/handover/objects/a").content == b"from the primary"


def test_a_bootstrap_copies_from_a_fresh_snapshot_when_the_newest_is_far_behind(
    server_factory: Factory,
) -> None:
    """A base backup starts with a checkpoint: a standby's bootstrap copies everything in
    bulk from a snapshot the primary writes for it, rather than following a long tail of
    records one batch at a time (``feed.BOOTSTRAP_SNAPSHOT_BEHIND``)."""
    primary = server_factory()
    with primary.client() as api:
        assert api.post("/buckets", json={"name": "bkt"}).status_code == 201
        primary.stop()  # a clean stop writes a snapshot at its last record
        primary.start()
        behind = BOOTSTRAP_SNAPSHOT_BEHIND + 5
        for n in range(behind):
            assert api.put(f"/buckets/bkt/objects/k{n}", content=b"%d" % n).is_success
        last = status(api)["last_sequence"]
        standby = start_standby(server_factory, primary)
        copied = re.findall(r"bootstrapped at record (\d+): (\d+) payloads", standby.logs())
        assert copied == [(str(last), str(behind))], standby.logs()[-2000:]
        with standby.client() as copy:
            wait_caught_up(api, copy)
            assert everything(copy) == everything(api)
