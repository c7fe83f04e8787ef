"""Open payload descriptors and reads on the event loop (``service.storage.descriptors``)."""

from __future__ import annotations

import os

import pytest

from fsseam.fs import ReadableFile, RealFileSystem, pread, pread_cached
from fsseam.simfs import SimFileSystem
from service.storage.descriptors import OpenPayloads


def open_file(path: str, data: bytes) -> ReadableFile:
    with open(path, "wb") as file:
        file.write(data)
    return RealFileSystem().open_read(path)


def is_open(file: ReadableFile) -> bool:
    fd = file.fileno()
    assert fd is not None
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_page_cached_range_is_read_without_waiting(tmp_path: str) -> None:
    data = os.urandom(200_000)
    file = open_file(os.path.join(tmp_path, "p"), data)
    assert pread(file, 0, len(data)) == data  # now in the page cache
    assert pread_cached(file, 1000, 65536) == data[1000 : 1000 + 65536]
    assert pread(file, 199_990, 100) == data[199_990:]


def test_a_file_without_a_descriptor_is_never_read_on_the_loop() -> None:
    fs = SimFileSystem()
    fs.mkdir("/d")
    writer = fs.create("/d/p")
    writer.write(b"abc")
    writer.close()
    assert pread_cached(fs.open_read("/d/p"), 0, 3) is None
    assert not OpenPayloads().adopt("p", fs.open_read("/d/p"))


def test_least_recently_used_descriptors_are_closed_beyond_the_bound(tmp_path: str) -> None:
    cache = OpenPayloads(max_open=2)
    files = {name: open_file(os.path.join(tmp_path, name), b"x") for name in "abc"}
    for name, file in files.items():
        assert cache.adopt(name, file)
        cache.release(name, file)
        if name == "a":
            assert cache.acquire("a") is file
            cache.release("a", file)
    assert len(cache) == 2
    assert not is_open(files["a"])
    assert is_open(files["b"]) and is_open(files["c"])


def test_a_pinned_descriptor_is_closed_only_when_its_last_user_lets_go(tmp_path: str) -> None:
    cache = OpenPayloads()
    file = open_file(os.path.join(tmp_path, "p"), b"x")
    assert cache.adopt("p", file)
    assert cache.acquire("p") is file  # a second user
    cache.discard(["p"])
    assert cache.acquire("p") is None
    assert is_open(file)
    cache.release("p", file)
    assert is_open(file)
    cache.release("p", file)
    assert not is_open(file)


def test_a_disabled_cache_keeps_nothing(tmp_path: str) -> None:
    cache = OpenPayloads(max_open=0)
    assert not cache.adopt("p", open_file(os.path.join(tmp_path, "p"), b"x"))
    with pytest.raises(ValueError):
        OpenPayloads(max_open=-1)


def test_descriptors_of_files_removed_by_another_process_are_dropped(tmp_path: str) -> None:
    cache = OpenPayloads(unlinked_every=0.0)
    files = {name: open_file(os.path.join(tmp_path, name), b"x") for name in "abc"}
    for name, file in files.items():
        assert cache.adopt(name, file)
        cache.release(name, file)
    pinned = cache.acquire("b")
    assert pinned is files["b"]
    os.unlink(os.path.join(tmp_path, "a"))
    os.unlink(os.path.join(tmp_path, "b"))
    cache.note_changes(moved=False)  # nothing moved: nothing is looked at
    assert len(cache) == 3 and is_open(files["a"])
    cache.note_changes(moved=True)
    assert len(cache) == 1 and cache.acquire("c") is files["c"]
    assert not is_open(files["a"])
    assert is_open(files["b"])  # in use: closed when its reader lets go
    cache.release("b", pinned)
    assert not is_open(files["b"]) and is_open(files["c"])


def test_removed_files_are_looked_for_at_most_once_per_interval(tmp_path: str) -> None:
    cache = OpenPayloads(unlinked_every=3600.0)
    first, second = (open_file(os.path.join(tmp_path, name), b"x") for name in "ab")
    assert cache.adopt("a", first)
    cache.release("a", first)
    os.unlink(os.path.join(tmp_path, "a"))
    cache.note_changes(moved=True)  # the first look is at once
    assert len(cache) == 0 and not is_open(first)
    assert cache.adopt("b", second)
    cache.release("b", second)
    os.unlink(os.path.join(tmp_path, "b"))
    cache.note_changes(moved=True)  # within the interval: left for a later look
    assert len(cache) == 1 and is_open(second)
    assert cache.drop_unlinked() == 1 and not is_open(second)
