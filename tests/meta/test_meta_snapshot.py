"""Snapshots: exact round trips, canonical bytes, frozen images, streamed reads, and
unreadable input."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgpack
import pytest

from service.meta import (
    MetaState,
    SnapshotFormatError,
    decode_snapshot,
    encode_snapshot,
    freeze,
    records,
)
from service.meta.model import ObjectVersion
from service.meta.snapshot import decode_image, stream_image
from tests.meta.factory import Factory, applied


def busy_state() -> tuple[Factory, MetaState]:
    """A state with something of everything: versions, markers, uploads, users, counters."""
    f, state = Factory(), MetaState()
    applied(state, records.server_initialized(server_id="srv", at=f.at()))
    applied(state, f.bucket("plain", quota=1000, tags={"env": "test"}))
    applied(state, f.bucket("vers", versioning=True))
    for key in ("z", "a/1", "a/2", "\u00e9t\u00e9"):
        applied(state, f.put(key, 7, bucket="plain", metadata={"m": key}))
        applied(state, f.put(key, 3, bucket="vers"))
    applied(state, f.delete("z", bucket="vers"))
    start = f.start(bucket="vers")
    applied(state, start)
    applied(state, f.part(start["upload_id"], 2))
    applied(
        state,
        records.user_created(user_id="u1", username="ada", password_hash="h", role="admin", at=1),
    )
    applied(
        state,
        records.access_key_created(
            access_key_id="bk_1", user_id="u1", name="n", secret_digest="d", at=2
        ),
    )
    applied(state, records.access_keys_used(last_used={"bk_1": 42}, at=43))
    queued, done = f.job(bucket="plain"), f.job("b.mp4", bucket="vers", prefix="out/")
    applied(state, queued)
    applied(state, done)
    for event in f.job_done(done["job_id"], "out/"):
        applied(state, event)
    applied(state, f.share(done["job_id"]))
    applied(state, f.share(done["job_id"], ttl_ms=5))
    state.apply({"type": "FromTheFuture"})
    return f, state


def test_round_trip_gives_an_equal_state_with_equal_indexes() -> None:
    _, state = busy_state()
    restored = decode_snapshot(encode_snapshot(freeze(state)))
    assert restored == state
    assert restored.server_id == "srv"
    assert restored.referenced_payloads() == state.referenced_payloads()
    assert restored.counts() == state.counts()
    for bucket in ("plain", "vers"):
        assert restored.bucket_usage(bucket) == state.bucket_usage(bucket)
        assert restored.list_objects(bucket, delimiter="/") == state.list_objects(
            bucket, delimiter="/"
        )
        assert restored.list_versions(bucket) == state.list_versions(bucket)
    assert restored.uploads() == state.uploads()
    assert restored.upload_parts(state.uploads()[0].upload_id) == state.upload_parts(
        state.uploads()[0].upload_id
    )
    assert restored.key_last_used("bk_1") == 42
    assert restored.anomalies() == {"unknown:FromTheFuture": 1}
    assert restored.media.jobs() == state.media.jobs() and len(state.media.jobs()) == 2
    for job in state.media.jobs():
        assert restored.media.shares_of(job.job_id) == state.media.shares_of(job.job_id)
    assert len(restored.media.shares_of(state.media.jobs()[1].job_id)) == 2


def test_equal_states_give_equal_bytes() -> None:
    _, state = busy_state()
    data = encode_snapshot(state)
    assert encode_snapshot(decode_snapshot(data)) == data
    assert encode_snapshot(busy_state()[1]) == data


def test_a_frozen_image_does_not_move_with_the_live_state() -> None:
    f, state = busy_state()
    frozen = freeze(state)
    expected = encode_snapshot(state)
    applied(state, f.put("a/1", 9, bucket="plain"))
    applied(state, f.part(state.uploads()[0].upload_id, 2))
    applied(state, f.drop_bucket("vers", force=True))
    assert encode_snapshot(frozen) == expected
    assert encode_snapshot(state) != expected


def test_the_restored_state_keeps_applying_events() -> None:
    f, state = busy_state()
    restored = decode_snapshot(encode_snapshot(state))
    queued, done = state.media.jobs()
    later = [
        f.put("a/3", 1, bucket="plain"),
        f.delete("a/1", bucket="plain"),
        f.job_update(queued.job_id, "processing"),
        f.share(done.job_id),
        records.video_share_revoked(
            share_id=state.media.shares_of(done.job_id)[0].share_id, reason="expired", at=f.at()
        ),
        f.drop_bucket("vers", force=True),
    ]
    for event in later:
        assert state.apply(event) == restored.apply(event)
    assert restored == state


def test_a_snapshot_of_another_format_is_refused() -> None:
    _, state = busy_state()
    doc = msgpack.unpackb(encode_snapshot(state), raw=False)
    doc["format"] = 99
    with pytest.raises(SnapshotFormatError, match="99"):
        decode_snapshot(msgpack.packb(doc, use_bin_type=True))


def test_damaged_snapshot_bytes_are_refused() -> None:
    _, state = busy_state()
    data = encode_snapshot(state)
    with pytest.raises(SnapshotFormatError):
        decode_snapshot(data[: len(data) // 2])
    with pytest.raises(SnapshotFormatError):
        decode_snapshot(msgpack.packb([1, 2, 3]))
    doc = msgpack.unpackb(data, raw=False)
    doc["buckets"][0] = doc["buckets"][0][:3]
    with pytest.raises(SnapshotFormatError):
        decode_snapshot(msgpack.packb(doc, use_bin_type=True))


def test_an_empty_state_round_trips() -> None:
    restored = decode_snapshot(encode_snapshot(MetaState()))
    assert restored == MetaState()
    assert restored.server_id is None and restored.counts() == (0, 0, 0)


def test_a_snapshot_from_before_videos_reads_as_having_no_jobs() -> None:
    _, state = busy_state()
    doc = msgpack.unpackb(encode_snapshot(state), raw=False)
    del doc["video_jobs"], doc["video_shares"]
    restored = decode_snapshot(msgpack.packb(doc, use_bin_type=True))
    assert restored.media.jobs() == []
    assert restored.list_buckets() == state.list_buckets()


def test_a_snapshot_plus_replay_round_trips_jobs_and_shares() -> None:
    f, state = busy_state()
    snapshot = encode_snapshot(state)
    queued = state.media.jobs()[0]
    tail = [
        f.job_update(queued.job_id, "processing"),
        f.job_update(queued.job_id, "failed", progress=0.5, error="the source is broken"),
        f.job(bucket="plain"),
    ]
    replayed = decode_snapshot(snapshot)
    for event in tail:
        applied(state, event)
        applied(replayed, event)
    assert replayed == state
    assert decode_snapshot(encode_snapshot(replayed)) == state
    failed = replayed.media.job(queued.job_id)
    assert failed is not None and failed.status == "failed" and failed.progress == 0.5


class _Pieces:
    """Snapshot bytes read a few at a time, as a file gives them."""

    def __init__(self, data: bytes, piece: int) -> None:
        self._data, self._piece, self._at = data, piece, 0

    def read(self, size: int = -1) -> bytes:
        size = self._piece if size < 0 else min(size, self._piece)
        chunk = self._data[self._at : self._at + size]
        self._at += len(chunk)
        return chunk


def test_a_streamed_snapshot_hands_over_every_key_and_reads_the_rest_as_decoded() -> None:
    _, state = busy_state()
    data = encode_snapshot(state)
    whole = decode_image(data)
    for piece in (1, 7, 1 << 20):
        seen: dict[str, list[tuple[str, tuple[ObjectVersion, ...]]]] = {}

        def on_key(
            bucket: str, key: str, rows: list[list[Any]], seen: dict[str, Any] = seen
        ) -> None:
            versions = tuple(ObjectVersion(bucket, key, *row) for row in rows)
            seen.setdefault(bucket, []).append((key, versions))

        image = stream_image(_Pieces(data, piece), on_key)
        assert image == replace(whole, objects={})
        assert {
            bucket: [(key, versions[key]) for key in keys]
            for bucket, (keys, versions) in whole.objects.items()
        } == seen


def test_a_streamed_snapshot_refuses_what_is_not_one() -> None:
    _, state = busy_state()
    data = encode_snapshot(state)
    doc = msgpack.unpackb(data, raw=False)
    objects_first = {"format": 1, "objects": doc["objects"], **doc}
    for bad in (b"", b"\x01", data[: len(data) // 2], msgpack.packb(objects_first)):
        with pytest.raises(SnapshotFormatError):
            stream_image(_Pieces(bad, 1 << 20), lambda bucket, key, rows: None)
