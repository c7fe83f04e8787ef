"""Shared directory fsyncs (``service.storage.dirsync``): group commit for promotes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from service.storage.dirsync import DirectorySync, GroupedIds
from service.storage.layout import is_valid_payload_id


class GatedFsync:
    """An fsync_dir that records its calls and blocks the first one until released."""

    def __init__(self, fail_on: frozenset[int] = frozenset()) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on
        """Numbers (1-based) of the calls that raise EIO."""

    def __call__(self, directory: str) -> None:
        self.calls.append(directory)
        number = len(self.calls)
        self.entered.set()
        self.release.wait(10)
        if number in self.fail_on:
            raise OSError(5, "EIO")


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def run_threads(count: int, target: Callable[[], None]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def waiting(sync: DirectorySync, directory: str) -> int:
    state = sync._directories.get(directory)
    return state.waiters if state is not None else 0


def test_promotes_arriving_during_an_fsync_share_the_next_one() -> None:
    fsync = GatedFsync()
    sync = DirectorySync(fsync)
    first = run_threads(1, lambda: sync.sync("d"))
    assert fsync.entered.wait(10)
    followers = run_threads(7, lambda: sync.sync("d"))
    wait_for(lambda: waiting(sync, "d") == 8)
    fsync.release.set()
    for thread in first + followers:
        thread.join(10)
    # One fsync that was already running when the followers came, one for all seven.
    assert fsync.calls == ["d", "d"]
    assert sync.fsyncs == 2
    assert sync._directories == {}


def test_a_call_never_returns_on_an_fsync_that_started_before_it() -> None:
    fsync = GatedFsync()
    sync = DirectorySync(fsync)
    done = threading.Event()
    run_threads(1, lambda: sync.sync("d"))
    assert fsync.entered.wait(10)

    def late() -> None:
        sync.sync("d")
        done.set()

    run_threads(1, late)
    wait_for(lambda: waiting(sync, "d") == 2)
    assert not done.is_set()
    fsync.release.set()
    assert done.wait(10)
    assert len(fsync.calls) == 2


def test_different_directories_do_not_share() -> None:
    calls: list[str] = []
    sync = DirectorySync(calls.append)
    sync.sync("a")
    sync.sync("b")
    sync.sync("a")
    assert calls == ["a", "b", "a"]


def test_a_failed_fsync_fails_every_caller_it_covered_and_the_next_call_starts_afresh() -> None:
    fsync = GatedFsync(fail_on=frozenset({1}))
    sync = DirectorySync(fsync)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            sync.sync("d")
        except OSError as exc:
            errors.append(exc)

    first = run_threads(1, call)
    assert fsync.entered.wait(10)
    followers = run_threads(3, call)
    wait_for(lambda: waiting(sync, "d") == 4)
    fsync.release.set()
    first[0].join(10)
    # The first fsync failed: only its leader started before it, so only the leader hears.
    assert len(errors) == 1
    for thread in followers:
        thread.join(10)
    assert len(errors) == 1  # the followers' own fsync succeeded
    sync.sync("d")
    assert len(fsync.calls) == 3


def test_followers_covered_by_a_failed_fsync_hear_of_it() -> None:
    fsync = GatedFsync(fail_on=frozenset({2}))
    sync = DirectorySync(fsync)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            sync.sync("d")
        except OSError as exc:
            errors.append(exc)

    run_threads(1, call)
    assert fsync.entered.wait(10)
    followers = run_threads(3, call)
    wait_for(lambda: waiting(sync, "d") == 4)
    fsync.release.set()
    for thread in followers:
        thread.join(10)
    assert [type(error) for error in errors] == [OSError] * 3


def test_grouped_ids_share_their_leaf_directory_for_a_run() -> None:
    ids = GroupedIds(run=4)
    drawn = [ids.next() for _ in range(12)]
    assert all(is_valid_payload_id(payload_id) for payload_id in drawn)
    assert len(set(drawn)) == 12
    prefixes = [payload_id[:4] for payload_id in drawn]
    for start in range(0, 12, 4):
        assert len(set(prefixes[start : start + 4])) == 1
    with pytest.raises(ValueError):
        GroupedIds(run=0)
