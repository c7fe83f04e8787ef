import hashlib
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsseam.fs import RealFileSystem
from service.storage import PayloadStore, payloads


def make_payload(store: PayloadStore, data: bytes) -> str:
    payload_id = store.new_payload_id()
    staging = store.create_staging()
    staging.write(data)
    store.promote(staging.finish(), payload_id)
    return payload_id


def read_all(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(st.binary(max_size=5000), max_size=8))
def test_join_equals_the_concatenation_and_its_sha256(
    tmp_path: str, parts: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(payloads, "JOIN_BUFFER_BYTES", 1000)  # windows smaller than parts
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    ids = [make_payload(store, part) for part in parts]
    whole = b"".join(parts)

    staged = store.join(ids)

    assert staged.size == len(whole)
    assert staged.sha256 == hashlib.sha256(whole).hexdigest()
    assert read_all(staged.path) == whole
    for payload_id, part in zip(ids, parts, strict=True):
        assert read_all(store.layout.payload_path(payload_id)) == part
    joined_id = store.new_payload_id()
    store.promote(staged, joined_id)
    assert store.verify(joined_id, len(whole), staged.sha256)


def test_join_streams_large_parts_through_a_fixed_window(tmp_path: str, recording_fs) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    big = os.urandom(payloads.JOIN_BUFFER_BYTES * 2 + 3)
    ids = [make_payload(store, big), make_payload(store, b"tail")]
    recording_fs.write_sizes.clear()
    recording_fs.events.clear()

    staged = store.join(ids)

    assert staged.sha256 == hashlib.sha256(big + b"tail").hexdigest()
    assert max(recording_fs.write_sizes) <= payloads.JOIN_BUFFER_BYTES
    assert len(recording_fs.write_sizes) >= 4
    assert recording_fs.kinds().count("fsync") == 1


def test_balanced_join_does_not_fsync(tmp_path: str, recording_fs) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="balanced")
    ids = [make_payload(store, b"a"), make_payload(store, b"b")]
    store.join(ids)
    assert "fsync" not in recording_fs.kinds()


def test_join_passes_mid_join_between_parts_and_no_put_crash_points(
    tmp_path: str, recording_fs, crash_hits
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    ids = [make_payload(store, bytes([n])) for n in range(3)]
    crash_hits.clear()
    store.join(ids)
    assert [name for kind, name in crash_hits if kind == "hit"] == ["multipart.mid_join"] * 2


def test_join_of_no_parts_is_the_empty_payload(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    staged = store.join([])
    assert (staged.size, staged.sha256) == (0, hashlib.sha256(b"").hexdigest())


def test_join_with_a_missing_part_fails_and_keeps_no_staging_file(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    present = make_payload(store, b"present")
    with pytest.raises(FileNotFoundError):
        store.join([present, store.new_payload_id()])
    assert os.listdir(store.layout.staging_dir) == []
    assert read_all(store.layout.payload_path(present)) == b"present"


def test_a_crash_mid_join_leaves_the_parts_and_a_staging_file_to_sweep(
    tmp_path: str, crash_at
) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    ids = [make_payload(store, b"one"), make_payload(store, b"two")]
    crash_at.arm("multipart.mid_join")
    with pytest.raises(crash_at.Crash):
        store.join(ids)
    assert len(os.listdir(store.layout.staging_dir)) == 1
    assert sorted(store.list_payload_ids()) == sorted(ids)
