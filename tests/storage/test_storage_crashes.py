"""Power loss at every operation of a PUT and of a join, on the simulated file system.

The claim under test: in strict durability a payload is either absent after a crash or
present with exactly its bytes, and once ``promote`` has returned it survives. ``random_subset``
lets later unsynced changes survive while earlier ones are lost, so a rename that reached the
disk before its data would show up as a payload with holes.
"""

import errno
import hashlib

import pytest

from fsseam.simfs import CRASH_MODES, CrashMode, ManualClock, SimFileSystem, SimulatedCrash
from service.storage import PayloadStore

ROOT = "/data"
CHUNKS = [b"alpha" * 50, b"beta" * 70, b"gamma" * 30]
PAYLOAD_ID = "ab" * 16


def fresh_fs(clock: ManualClock | None = None, capacity: int = 1 << 40) -> SimFileSystem:
    fs = SimFileSystem(clock=clock, capacity=capacity)
    fs.mkdir(ROOT)
    fs.fsync_dir("/")  # the data root itself is the engine's to make durable
    return fs


def put(store: PayloadStore, chunks: list[bytes], payload_id: str) -> None:
    staging = store.create_staging()
    for chunk in chunks:
        staging.write(chunk)
    store.promote(staging.finish(), payload_id)


def operations_of_a_put() -> int:
    fs = fresh_fs()
    store = PayloadStore(ROOT, fs=fs, durability="strict")
    before = fs.operations
    put(store, CHUNKS, PAYLOAD_ID)
    return fs.operations - before


@pytest.mark.parametrize("mode", CRASH_MODES)
def test_a_strict_put_is_all_or_nothing_at_every_crash_point(mode: CrashMode) -> None:
    body = b"".join(CHUNKS)
    total = operations_of_a_put()
    for crash_index in range(total + 1):
        fs = fresh_fs()
        store = PayloadStore(ROOT, fs=fs, durability="strict")
        fs.crash_at(fs.operations + crash_index)
        try:
            put(store, CHUNKS, PAYLOAD_ID)
            promoted = True
        except SimulatedCrash:
            promoted = False
        assert promoted == (crash_index == total)

        image = fs.crash_image(mode, seed=crash_index)
        after = PayloadStore(ROOT, fs=image, durability="strict")
        survivors = list(after.list_payload_ids())
        assert survivors in ([], [PAYLOAD_ID]), crash_index
        if promoted:
            assert survivors == [PAYLOAD_ID]
        if survivors:
            assert after.verify(PAYLOAD_ID, len(body), hashlib.sha256(body).hexdigest())


def test_a_strict_join_leaves_its_parts_intact_at_every_crash_point() -> None:
    parts = [b"one" * 100, b"two" * 100, b"three" * 100]
    part_ids = [f"{n:02x}" * 16 for n in range(1, 4)]
    setup = fresh_fs()
    base_store = PayloadStore(ROOT, fs=setup, durability="strict")
    for part_id, part in zip(part_ids, parts, strict=True):
        put(base_store, [part], part_id)
    before = setup.operations
    staged = base_store.join(part_ids)
    base_store.promote(staged, PAYLOAD_ID)
    total = setup.operations - before
    assert staged.sha256 == hashlib.sha256(b"".join(parts)).hexdigest()

    for crash_index in range(total):
        fs = fresh_fs()
        store = PayloadStore(ROOT, fs=fs, durability="strict")
        for part_id, part in zip(part_ids, parts, strict=True):
            put(store, [part], part_id)
        fs.crash_at(fs.operations + crash_index)
        with pytest.raises(SimulatedCrash):
            store.promote(store.join(part_ids), PAYLOAD_ID)
        after = PayloadStore(
            ROOT, fs=fs.crash_image("random_subset", seed=crash_index), durability="strict"
        )
        for part_id, part in zip(part_ids, parts, strict=True):
            assert after.verify(part_id, len(part), hashlib.sha256(part).hexdigest())
        if PAYLOAD_ID in set(after.list_payload_ids()):
            assert after.verify(PAYLOAD_ID, staged.size, staged.sha256)


def test_a_full_disk_fails_the_put_and_keeps_nothing_partial() -> None:
    fs = fresh_fs(capacity=1000)
    store = PayloadStore(ROOT, fs=fs, durability="strict")
    staging = store.create_staging()
    staging.write(b"x" * 600)
    with pytest.raises(OSError) as raised:
        staging.write(b"y" * 600)
    assert raised.value.errno == errno.ENOSPC
    assert fs.listdir(store.layout.staging_dir) == []
    assert fs.disk_usage(ROOT)[1] == 1000


def test_gc_and_sweep_age_files_by_the_file_system_clock() -> None:
    clock = ManualClock()
    fs = fresh_fs(clock=clock)
    store = PayloadStore(ROOT, fs=fs, durability="strict", clock=clock)
    put(store, [b"orphan"], PAYLOAD_ID)
    store.create_staging().write(b"abandoned")
    clock.advance(100)
    assert store.collect_garbage(lambda _: False, 3600).kept_young == 1
    assert store.sweep_staging(3600) == 0
    clock.advance(3600)
    assert store.collect_garbage(lambda _: False, 3600).removed == 1
    assert store.sweep_staging(3600) == 1
    assert list(store.list_payload_ids()) == []
    assert fs.listdir(store.layout.staging_dir) == []
