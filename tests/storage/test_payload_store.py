import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsseam.fs import RealFileSystem
from service.storage import PayloadStore, StagedPayload
from tests.storage.conftest import RecordingFileSystem


def put(store: PayloadStore, chunks: list[bytes]) -> tuple[str, StagedPayload]:
    staging = store.create_staging()
    for chunk in chunks:
        staging.write(chunk)
    staged = staging.finish()
    payload_id = store.new_payload_id()
    store.promote(staged, payload_id)
    return payload_id, staged


def read_payload(store: PayloadStore, payload_id: str) -> bytes:
    source = store.open_payload(payload_id)
    try:
        return source.read()
    finally:
        source.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chunks=st.lists(st.binary(max_size=3000), max_size=20))
def test_payload_reads_back_exactly_what_was_staged_with_its_sha256(
    tmp_path: str, chunks: list[bytes]
) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    body = b"".join(chunks)
    payload_id, staged = put(store, chunks)
    assert staged.size == len(body)
    assert staged.sha256 == hashlib.sha256(body).hexdigest()
    assert read_payload(store, payload_id) == body
    assert store.payload_size(payload_id) == len(body)
    assert store.verify(payload_id, len(body), staged.sha256)


def test_promote_moves_the_staging_file_into_the_fan_out_tree(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    payload_id, _ = put(store, [b"hello"])
    assert os.listdir(store.layout.staging_dir) == []
    assert os.path.isfile(store.layout.payload_path(payload_id))
    assert list(store.list_payload_ids()) == [payload_id]


def test_discard_leaves_no_file_and_may_be_repeated(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    staging = store.create_staging()
    staging.write(b"x" * 1000)
    assert os.listdir(store.layout.staging_dir) != []
    staging.discard()
    staging.discard()
    assert os.listdir(store.layout.staging_dir) == []
    with pytest.raises(ValueError):
        staging.write(b"more")


def test_discard_after_finish_removes_an_unpromoted_body(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    staging = store.create_staging()
    staging.write(b"rejected by BadDigest")
    staging.finish()
    staging.discard()
    assert os.listdir(store.layout.staging_dir) == []


def test_discard_after_promote_keeps_the_payload(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    staging = store.create_staging()
    staging.write(b"kept")
    payload_id = store.new_payload_id()
    store.promote(staging.finish(), payload_id)
    staging.discard()
    assert read_payload(store, payload_id) == b"kept"


def test_strict_put_fsyncs_data_before_rename_and_directory_after(
    tmp_path: str, recording_fs, crash_hits
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    recording_fs.events.clear()
    payload_id, staged = put(store, [b"a", b"b"])
    leaf = store.layout.payload_dir(payload_id)
    first, _ = store.layout.fan_out_dirs(payload_id)
    target = store.layout.payload_path(payload_id)
    assert recording_fs.events == [
        ("create", staged.path),
        ("hit", "put.staging_created"),
        ("write", staged.path),
        ("hit", "put.chunk_written"),
        ("write", staged.path),
        ("hit", "put.chunk_written"),
        ("hit", "put.body_complete"),
        ("fsync", staged.path),
        ("hit", "put.after_data_fsync"),
        ("mkdir", first),
        ("fsync_dir", store.layout.payloads_dir),
        ("mkdir", leaf),
        ("fsync_dir", first),
        ("rename", target),
        ("hit", "put.after_rename"),
        ("fsync_dir", leaf),
        ("hit", "put.after_dir_fsync"),
    ]


def test_strict_put_into_a_known_directory_fsyncs_only_file_and_leaf(
    tmp_path: str, recording_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    first_id, _ = put(store, [b"one"])
    recording_fs.events.clear()
    staging = store.create_staging()
    staging.write(b"two")
    second_id = first_id[:4] + store.new_payload_id()[4:]
    store.promote(staging.finish(), second_id)
    assert [kind for kind in recording_fs.kinds() if kind.startswith("fsync")] == [
        "fsync",
        "fsync_dir",
    ]
    assert ("fsync_dir", store.layout.payload_dir(second_id)) in recording_fs.events


def test_a_fan_out_directory_left_by_an_earlier_run_is_reused_without_mkdir(
    tmp_path: str, recording_fs
) -> None:
    payload_id = PayloadStore.new_payload_id()
    PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    os.makedirs(os.path.join(tmp_path, "payloads", payload_id[0:2], payload_id[2:4]))
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    recording_fs.events.clear()
    staging = store.create_staging()
    store.promote(staging.finish(), payload_id)
    assert "mkdir" not in recording_fs.kinds()


def test_balanced_put_never_fsyncs(tmp_path: str, recording_fs) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="balanced")
    payload_id, _ = put(store, [b"a" * 100, b"b"])
    store.remove([payload_id])
    assert not [kind for kind in recording_fs.kinds() if kind.startswith("fsync")]
    assert "rename" in recording_fs.kinds()


def test_remove_deletes_present_payloads_and_ignores_missing_ones(
    tmp_path: str, recording_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    first, _ = put(store, [b"1"])
    second = first[:4] + store.new_payload_id()[4:]
    staging = store.create_staging()
    store.promote(staging.finish(), second)
    recording_fs.events.clear()
    assert store.remove([first, second, store.new_payload_id()]) == 2
    assert list(store.list_payload_ids()) == []
    # Both lived in one directory: it is fsynced once, after both unlinks.
    assert recording_fs.kinds() == ["unlink", "unlink", "unlink", "fsync_dir"]


def test_remove_refuses_a_non_id_before_deleting_anything(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    payload_id, _ = put(store, [b"keep"])
    with pytest.raises(ValueError):
        store.remove([payload_id, "../staging"])
    assert read_payload(store, payload_id) == b"keep"


def test_verify_rejects_wrong_size_wrong_checksum_and_missing_payloads(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    payload_id, staged = put(store, [b"content"])
    assert store.verify(payload_id, 7, staged.sha256.upper())
    assert not store.verify(payload_id, 8, staged.sha256)
    assert not store.verify(payload_id, 7, hashlib.sha256(b"other!!").hexdigest())
    assert not store.verify(store.new_payload_id(), 7, staged.sha256)


def test_opening_a_missing_payload_raises_file_not_found(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    with pytest.raises(FileNotFoundError):
        store.open_payload(store.new_payload_id())


def test_open_payload_offers_a_descriptor(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    payload_id, _ = put(store, [b"0123456789"])
    source = store.open_payload(payload_id)
    try:
        descriptor = source.fileno()
        assert descriptor is not None
        assert os.pread(descriptor, 4, 3) == b"3456"
    finally:
        source.close()


def test_disk_usage_reports_the_data_root_file_system(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    total, free = store.disk_usage()
    assert total > 0
    assert 0 <= free <= total


def test_a_crash_after_rename_leaves_an_orphan_that_startup_gc_collects(
    tmp_path: str, crash_at
) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    crash_at.arm("put.after_rename")
    payload_id = store.new_payload_id()
    staging = store.create_staging()
    staging.write(b"never committed")
    with pytest.raises(crash_at.Crash):
        store.promote(staging.finish(), payload_id)
    assert list(store.list_payload_ids()) == [payload_id]
    result = store.collect_garbage(lambda _: False, 0.0)
    assert result.removed == 1
    assert list(store.list_payload_ids()) == []


def test_a_crash_mid_body_leaves_the_staging_file_for_the_sweep(tmp_path: str, crash_at) -> None:
    clock = [0.0]
    store = PayloadStore(
        str(tmp_path), fs=RealFileSystem(), durability="strict", clock=lambda: clock[0]
    )
    crash_at.arm("put.chunk_written")
    staging = store.create_staging()
    with pytest.raises(crash_at.Crash):
        staging.write(b"half")
    assert os.listdir(store.layout.staging_dir) != []
    clock[0] = os.stat(staging.path).st_mtime + 3601
    assert store.sweep_staging(3600) == 1
    assert os.listdir(store.layout.staging_dir) == []


def test_unknown_durability_is_refused(tmp_path: str) -> None:
    with pytest.raises(ValueError):
        PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="fast")  # type: ignore[arg-type]


def test_concurrent_puts_never_promote_into_a_directory_not_yet_durable(
    tmp_path: str, recording_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="strict")
    prefixes = ["0000", "0001", "0100", "ffff"]

    def worker(number: int) -> list[tuple[str, bytes]]:
        stored = []
        for index in range(25):
            body = f"{number}-{index}".encode()
            staging = store.create_staging()
            staging.write(body)
            payload_id = prefixes[index % 4] + store.new_payload_id()[4:]
            store.promote(staging.finish(), payload_id)
            stored.append((payload_id, body))
        return stored

    with ThreadPoolExecutor(max_workers=8) as executor:
        results = [item for batch in executor.map(worker, range(8)) for item in batch]

    for payload_id, body in results:
        assert read_payload(store, payload_id) == body
    events = recording_fs.events
    for prefix in prefixes:
        first, leaf = store.layout.fan_out_dirs(prefix + "0" * 28)
        first_rename = next(
            i for i, (kind, path) in enumerate(events) if kind == "rename" and path.startswith(leaf)
        )
        assert events.index(("fsync_dir", first)) < first_rename
        assert events.index(("mkdir", leaf)) < first_rename
    # roots (staging, payloads, assembly), first levels, leaves
    assert [kind for kind, _ in events].count("mkdir") == 3 + 3 + 4


def test_discard_staged_removes_a_sealed_body_and_tolerates_its_absence(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    staging = store.create_staging()
    staging.write(b"checksum mismatch")
    staged = staging.finish()
    store.discard_staged(staged)
    store.discard_staged(staged)
    assert os.listdir(store.layout.staging_dir) == []


def test_discard_staged_refuses_a_path_outside_the_staging_dir(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")
    payload_id, staged = put(store, [b"promoted"])
    outside = StagedPayload(store.layout.payload_path(payload_id), staged.size, staged.sha256)
    with pytest.raises(ValueError):
        store.discard_staged(outside)
    assert read_payload(store, payload_id) == b"promoted"


@pytest.mark.parametrize("unit_bytes", [1, 64 * 1024, 256 * 1024, 1024 * 1024])
def test_a_batch_hashed_while_written_stores_what_one_by_one_writes_would(
    tmp_path: str, unit_bytes: int
) -> None:
    """Batches under the overlap threshold are written one by one, larger ones are hashed on
    a helper thread: the file and its SHA-256 must not tell the two apart."""
    store = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    units = [os.urandom(unit_bytes) for _ in range(3)]
    staging = store.create_staging()
    staging.write_batch(units)
    staging.write(b"tail")
    staging.write_batch(units[:1])
    staged = staging.finish()
    whole = b"".join(units) + b"tail" + units[0]
    assert staged.size == len(whole)
    assert staged.sha256 == hashlib.sha256(whole).hexdigest()
    with open(staged.path, "rb") as file:
        assert file.read() == whole


@pytest.mark.parametrize(("durability", "expected_starts"), [("strict", 2), ("balanced", 0)])
def test_strict_staging_starts_writeback_every_8_mib(
    tmp_path: str, recording_fs: RecordingFileSystem, durability: str, expected_starts: int
) -> None:
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability=durability)
    chunks = [os.urandom(1024 * 1024) for _ in range(20)]  # 20 MiB: two 8 MiB marks
    payload_id, staged = put(store, chunks)
    assert len(recording_fs.writebacks) == expected_starts
    assert set(recording_fs.writebacks) <= {staged.path}
    assert read_payload(store, payload_id) == b"".join(chunks)
    assert staged.sha256 == hashlib.sha256(b"".join(chunks)).hexdigest()
