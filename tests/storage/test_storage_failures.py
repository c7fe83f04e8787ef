import errno
import os

import pytest

from service.storage import PayloadStore


def test_enospc_while_writing_discards_the_staging_file_and_reraises(
    tmp_path: str, failing_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=failing_fs, durability="strict")
    failing_fs.write_budget = 1500
    staging = store.create_staging()
    staging.write(b"x" * 1000)
    with pytest.raises(OSError) as raised:
        staging.write(b"y" * 1000)
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(store.layout.staging_dir) == []
    with pytest.raises(ValueError):
        staging.finish()
    staging.discard()


def test_eio_on_the_data_fsync_discards_the_staging_file_and_reraises(
    tmp_path: str, failing_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=failing_fs, durability="strict")
    failing_fs.fsync_errno = errno.EIO
    staging = store.create_staging()
    staging.write(b"body")
    with pytest.raises(OSError) as raised:
        staging.finish()
    assert raised.value.errno == errno.EIO
    assert os.listdir(store.layout.staging_dir) == []


def test_enospc_during_a_join_keeps_the_parts_and_no_partial_output(
    tmp_path: str, failing_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=failing_fs, durability="balanced")
    ids = []
    for part in (b"a" * 700, b"b" * 700):
        staging = store.create_staging()
        staging.write(part)
        payload_id = store.new_payload_id()
        store.promote(staging.finish(), payload_id)
        ids.append(payload_id)
    failing_fs.write_budget = 1400 + 1000
    with pytest.raises(OSError) as raised:
        store.join(ids)
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(store.layout.staging_dir) == []
    assert sorted(store.list_payload_ids()) == sorted(ids)


def test_enospc_in_a_batch_hashed_while_written_discards_the_staging_file(
    tmp_path: str, failing_fs
) -> None:
    store = PayloadStore(str(tmp_path), fs=failing_fs, durability="strict")
    staging = store.create_staging()
    failing_fs.write_budget = 300 * 1024  # the second 256 KiB unit crosses it
    with pytest.raises(OSError) as raised:
        staging.write_batch([b"a" * 256 * 1024] * 4)
    assert raised.value.errno == errno.ENOSPC
    assert os.listdir(store.layout.staging_dir) == []
