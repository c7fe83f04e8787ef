"""``PayloadStore.store_small``: a whole small body staged, sealed and promoted in one call."""

from __future__ import annotations

import errno
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.storage import DigestMismatch, PayloadStore
from tests.storage.conftest import FailingFileSystem, RecordingFileSystem


def read_payload(store: PayloadStore, payload_id: str) -> bytes:
    source = store.open_payload(payload_id)
    try:
        return source.read()
    finally:
        source.close()


def test_a_small_body_is_stored_durably_in_the_streamed_body_order(tmp_path: str) -> None:
    fs = RecordingFileSystem()
    store = PayloadStore(str(tmp_path), fs=fs, durability="strict")
    payload_id = store.next_payload_id()
    fs.events.clear()
    body = b"small body" * 100
    staged = store.store_small(body, payload_id, hashlib.sha256(body).hexdigest())
    assert staged.sha256 == hashlib.sha256(body).hexdigest()
    assert staged.size == len(body)
    assert read_payload(store, payload_id) == body
    kinds = [kind for kind in fs.kinds() if kind != "mkdir"]
    # Data fsync before the rename, the directory fsync after it: as a streamed PUT.
    assert kinds[0] == "create"
    assert kinds.index("fsync") < kinds.index("rename") < len(kinds) - 1
    assert kinds[-1] == "fsync_dir"
    assert os.listdir(store.layout.staging_dir) == []


def test_a_body_that_is_not_the_declared_digest_leaves_nothing(tmp_path: str) -> None:
    store = PayloadStore(str(tmp_path), fs=RecordingFileSystem(), durability="strict")
    payload_id = store.next_payload_id()
    with pytest.raises(DigestMismatch) as raised:
        store.store_small(b"body", payload_id, "0" * 64)
    assert raised.value.actual == hashlib.sha256(b"body").hexdigest()
    assert os.listdir(store.layout.staging_dir) == []
    assert list(store.list_payload_ids()) == []


@pytest.mark.parametrize("failure", ["write", "fsync"])
def test_a_failed_write_or_fsync_leaves_nothing_and_reraises(tmp_path: str, failure: str) -> None:
    fs = FailingFileSystem()
    store = PayloadStore(str(tmp_path), fs=fs, durability="strict")
    if failure == "write":
        fs.write_budget = 10
    else:
        fs.fsync_errno = errno.EIO
    with pytest.raises(OSError):
        store.store_small(b"x" * 100, store.next_payload_id())
    assert os.listdir(store.layout.staging_dir) == []
    assert list(store.list_payload_ids()) == []


def test_concurrent_strict_promotes_share_directory_fsyncs(tmp_path: str) -> None:
    fs = RecordingFileSystem()
    fs.write_delay = 0.002
    # A directory fsync slower than a write: while one runs, the other threads' promotes land
    # and wait for the next. Without it a tmpfs fsync ends before anyone arrives, and whether
    # two ever meet is up to the scheduler (CI saw 48 of 48 unshared on a loaded machine).
    fs.fsync_dir_delay = 0.03
    store = PayloadStore(str(tmp_path), fs=fs, durability="strict")
    bodies = [os.urandom(512) for _ in range(48)]
    ids = [store.next_payload_id() for _ in bodies]
    assert len({payload_id[:4] for payload_id in ids}) == 1  # one leaf directory
    fs.events.clear()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(store.store_small, bodies, ids))
    for body, payload_id in zip(bodies, ids, strict=True):
        assert read_payload(store, payload_id) == body
    leaf = store.layout.payload_dir(ids[0])
    leaf_fsyncs = [path for kind, path in fs.events if kind == "fsync_dir" and path == leaf]
    assert 1 <= len(leaf_fsyncs) < len(bodies)
