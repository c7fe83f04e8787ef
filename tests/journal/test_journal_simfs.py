"""The simulated file system: the FileSystem contract (shared with the real one) and its
crash, fault and durability semantics."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest

from fsseam.fs import FileSystem, RealFileSystem, WritableFile
from fsseam.simfs import Fault, ManualClock, SimFileSystem, SimulatedCrash
from tests.journal.journal_testkit import read_file


@pytest.fixture(params=["real", "sim"])
def fs_root(request: pytest.FixtureRequest, tmp_path: str) -> Iterator[tuple[FileSystem, str]]:
    """The same contract tests run on both implementations (Tornado's mixin idea)."""
    if request.param == "real":
        yield RealFileSystem(), str(tmp_path)
    else:
        fs = SimFileSystem()
        fs.mkdir("/root")
        yield fs, "/root"


def write(fs: FileSystem, path: str, data: bytes, sync: bool = False) -> None:
    file = fs.open_append(path)
    try:
        file.write(data)
        if sync:
            file.fsync()
    finally:
        file.close()


# -- the contract ---------------------------------------------------------------------------


def test_create_refuses_an_existing_file(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    fs.create(path).close()
    with pytest.raises(FileExistsError):
        fs.create(path)


def test_open_append_continues_at_the_end(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    write(fs, path, b"hello ")
    file = fs.open_append(path)
    assert file.tell() == 6
    file.write(memoryview(b"world"))
    file.close()
    assert read_file(fs, path) == b"hello world"
    assert fs.stat(path).size == 11 and not fs.stat(path).is_dir


def test_read_seek_and_readinto(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    write(fs, path, b"0123456789")
    file = fs.open_read(path)
    file.seek(3)
    assert file.read(4) == b"3456"
    buffer = bytearray(10)
    assert file.readinto(buffer) == 3
    assert bytes(buffer[:3]) == b"789"
    assert file.read() == b""
    assert file.size() == 10
    file.close()


def test_truncate_through_a_handle_and_by_path(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    write(fs, path, b"0123456789")
    file = fs.open_append(path)
    file.truncate(4)
    file.write(b"xy")
    file.close()
    assert read_file(fs, path) == b"0123xy"
    fs.truncate(path, 2)
    assert read_file(fs, path) == b"01"


def test_rename_replaces_the_target(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    source, target = os.path.join(root, "s"), os.path.join(root, "t")
    write(fs, source, b"new")
    write(fs, target, b"old")
    fs.rename(source, target)
    assert read_file(fs, target) == b"new"
    assert not fs.exists(source)
    assert sorted(fs.listdir(root)) == ["t"]


def test_directories(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    nested = os.path.join(root, "a", "b")
    fs.mkdir(nested)
    fs.mkdir(nested)  # no error if it exists
    assert fs.stat(nested).is_dir
    write(fs, os.path.join(nested, "f"), b"x")
    with pytest.raises(OSError):
        fs.rmdir(nested)
    fs.unlink(os.path.join(nested, "f"))
    fs.rmdir(nested)
    assert fs.listdir(os.path.join(root, "a")) == []
    with pytest.raises(FileNotFoundError):
        fs.listdir(nested)
    with pytest.raises(FileNotFoundError):
        fs.unlink(os.path.join(root, "missing"))
    fs.fsync_dir(root)


def test_copy_range_copies_from_the_source_offset(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    write(fs, os.path.join(root, "s"), b"0123456789")
    source = fs.open_read(os.path.join(root, "s"))
    target = fs.create(os.path.join(root, "t"))
    source.seek(2)
    assert fs.copy_range(source, target, 5) == 5
    source.close()
    target.close()
    assert read_file(fs, os.path.join(root, "t")) == b"23456"


def test_fsync_file_needs_no_handle(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    write(fs, path, b"late")
    fs.fsync_file(path)
    if isinstance(fs, SimFileSystem):
        fs.fsync_dir(root)
        fs.fsync_dir("/")
        assert fs.crash_image("lose_unsynced").read_bytes(path) == b"late"
    with pytest.raises(FileNotFoundError):
        fs.fsync_file(os.path.join(root, "missing"))


def test_create_applies_the_mode_from_the_first_instant(tmp_path: str) -> None:
    path = os.path.join(tmp_path, "secret")
    RealFileSystem().create(path, 0o600).close()
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_disk_usage_reports_total_and_free(fs_root: tuple[FileSystem, str]) -> None:
    fs, root = fs_root
    total, free = fs.disk_usage(root)
    assert 0 <= free <= total


def test_start_writeback_keeps_the_bytes_and_the_file_writable(
    fs_root: tuple[FileSystem, str],
) -> None:
    fs, root = fs_root
    path = os.path.join(root, "a")
    file = fs.create(path)
    file.write(b"x" * 100_000)
    file.start_writeback()
    file.write(b"y")
    file.fsync()
    file.close()
    assert read_file(fs, path) == b"x" * 100_000 + b"y"


# -- simulation specifics -------------------------------------------------------------------


def durable_empty_file() -> tuple[SimFileSystem, WritableFile]:
    """A simulated disk holding ``/d/f``, empty, its directory entries durable."""
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    file = fs.create("/d/f")
    fs.fsync_dir("/d")
    return fs, file


def test_start_writeback_promises_nothing_until_fsync() -> None:
    fs, file = durable_empty_file()
    file.write(b"cached")
    file.start_writeback()
    file.close()
    assert fs.crash_image("lose_unsynced").read_bytes("/d/f") == b""


def test_fsync_makes_data_durable_and_the_rest_is_lost() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    write(fs, "/d/f", b"durable", sync=True)
    fs.fsync_dir("/d")
    write(fs, "/d/f", b" cached")
    assert fs.unsynced() == 1
    assert fs.crash_image("lose_unsynced").read_bytes("/d/f") == b"durable"
    assert fs.crash_image("keep_unsynced").read_bytes("/d/f") == b"durable cached"


def test_directory_entries_need_fsync_dir() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    write(fs, "/d/kept", b"1", sync=True)
    fs.fsync_dir("/d")
    write(fs, "/d/lost", b"2", sync=True)  # data durable, name not
    fs.rename("/d/kept", "/d/renamed")
    image = fs.crash_image("lose_unsynced")
    assert image.listdir("/d") == ["kept"]
    assert fs.crash_image("keep_unsynced").listdir("/d") == ["lost", "renamed"]


def test_a_directory_whose_entry_was_never_synced_vanishes() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    write(fs, "/d/f", b"x", sync=True)
    fs.fsync_dir("/d")
    assert not fs.crash_image("lose_unsynced").exists("/d")


def test_random_subset_can_keep_a_later_write_and_lose_an_earlier_one() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    fs.create("/d/f").close()
    fs.fsync_dir("/d")
    write(fs, "/d/f", b"AAAA")
    write(fs, "/d/f", b"BBBB")
    outcomes = {fs.crash_image("random_subset", seed).read_bytes("/d/f") for seed in range(40)}
    assert outcomes == {b"", b"AAAA", b"\0\0\0\0BBBB", b"AAAABBBB"}
    again = {fs.crash_image("random_subset", seed).read_bytes("/d/f") for seed in range(40)}
    assert again == outcomes  # deterministic per seed
    assert fs.crash_image("random_subset", 7).read_bytes("/d/f") == fs.crash_image(
        "random_subset", 7
    ).read_bytes("/d/f")


def test_torn_tail_keeps_a_strict_prefix_of_the_last_write() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    write(fs, "/d/f", b"head-", sync=True)
    fs.fsync_dir("/d")
    write(fs, "/d/f", b"middle-")
    write(fs, "/d/f", b"0123456789")
    for seed in range(10):
        data = fs.crash_image("torn_tail", seed).read_bytes("/d/f")
        assert data.startswith(b"head-middle-")
        assert len(data) < len(b"head-middle-0123456789")
        assert b"head-middle-0123456789".startswith(data)


def test_crash_at_operation_k_raises_from_then_on() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.crash_at(fs.operations + 1)
    fs.create("/d/a").close()
    with pytest.raises(SimulatedCrash):
        fs.create("/d/b")
    with pytest.raises(SimulatedCrash):
        fs.listdir("/d")
    assert fs.crashed
    assert fs.crash_image("keep_unsynced").listdir("/d") == ["a"]


def test_failures_once_and_persistent() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    fs.fail_at(fs.operations, errno.EIO, operations={"write"})
    file = fs.create("/d/f")
    with pytest.raises(OSError) as raised:
        file.write(b"x")
    assert raised.value.errno == errno.EIO
    file.write(b"y")  # once: the next write succeeds
    fs.inject(Fault(fs.operations, "enospc", persistent=True, operations=frozenset({"write"})))
    for _ in range(3):
        with pytest.raises(OSError) as raised:
            file.write(b"z")
        assert raised.value.errno == errno.ENOSPC
    assert fs.read_bytes("/d/f") == b"y"
    assert fs.counts["write"] == 5


def test_failed_fsync_drops_the_dirty_data_and_a_retry_does_not_save_it() -> None:
    fs, file = durable_empty_file()
    file.write(b"lost")
    fs.fail_at(fs.operations, errno.EIO, operations={"fsync"})
    with pytest.raises(OSError):
        file.fsync()
    file.fsync()  # "succeeds", like Linux after fsyncgate
    assert fs.read_bytes("/d/f") == b"lost"  # still in the page cache
    assert fs.crash_image("lose_unsynced").read_bytes("/d/f") == b""
    assert fs.crash_image("keep_unsynced").read_bytes("/d/f") == b""


def test_capacity_runs_out_with_enospc() -> None:
    fs = SimFileSystem(capacity=10)
    fs.mkdir("/d")
    write(fs, "/d/a", b"12345678")
    assert fs.disk_usage("/d") == (10, 2)
    with pytest.raises(OSError) as raised:
        write(fs, "/d/b", b"123")
    assert raised.value.errno == errno.ENOSPC
    fs.unlink("/d/a")
    assert fs.disk_usage("/d") == (10, 10)


def test_mtimes_come_from_the_injected_clock() -> None:
    clock = ManualClock(100.0)
    fs = SimFileSystem(clock=clock)
    fs.mkdir("/d")
    write(fs, "/d/f", b"x")
    clock.advance(5)
    assert fs.stat("/d/f").mtime == 100.0
    write(fs, "/d/f", b"y")
    assert fs.stat("/d/f").mtime == 105.0


def test_faults_can_target_paths_and_operations() -> None:
    fs = SimFileSystem()
    fs.mkdir("/a")
    fs.mkdir("/b")
    fs.inject(Fault(0, "eio", persistent=True, paths=("/b/",)))
    write(fs, "/a/f", b"fine")
    with pytest.raises(OSError):
        write(fs, "/b/f", b"fails")
    with pytest.raises(ValueError):
        fs.crash_at(0, operations={"no-such-operation"})
