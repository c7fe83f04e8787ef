"""One contract suite for every persistent index: LMDB and the crash tests' simulated one.

``service.index.protocol.PersistentIndex`` is what the engine asks of an index: batches that
commit their effects with the journal's sequence, the rest of the state and a layout mark,
kept across a reopen. The engine runs LMDB on a real disk and the simulated index
(``tests/crash/simindex.py``) under the crash tests, so both must keep the same promises; as
Garage's ``src/db/test.rs`` runs one suite on every adapter, each test here runs on each
(the ``index`` fixture's ``params``). The state machine of ``tests/meta/test_lmdb_index.py``
checks LMDB's listings against the in-memory model besides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fsseam.durable import make_dirs_durably
from fsseam.simfs import SimFileSystem
from service.index.lmdb_index import FORMAT, LmdbObjectIndex
from service.index.protocol import PersistentIndex
from service.meta import MetaState
from service.meta.model import Usage
from tests.crash.simindex import SimIndex
from tests.meta.factory import Factory, applied

Opener = Callable[[], PersistentIndex]


@pytest.fixture(params=["lmdb", "simulated"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same index again at each call (the test closes what it opened)."""
    if request.param == "lmdb":
        path = str(tmp_path / "index")
        yield lambda: LmdbObjectIndex(path)
        return
    fs = SimFileSystem()
    make_dirs_durably(fs, "/srv/index")
    yield lambda: SimIndex(fs, "/srv/index")


def batch(index: PersistentIndex, state: MetaState, events: list[dict[str, object]]) -> None:
    """Apply ``events`` to ``state`` (whose objects are in ``index``) in one open batch."""
    index.begin()
    for event in events:
        applied(state, event)


def test_a_new_index_holds_no_state(reopen: Opener) -> None:
    index = reopen()
    try:
        assert index.applied() == (0, 0)
        assert index.rest() is None
        assert index.snapshot_mark() == (0, 0)
        assert not index.in_batch
        assert index.usages() == {}
    finally:
        index.close()


def test_a_batch_commits_its_effects_its_sequence_and_the_rest_together(reopen: Opener) -> None:
    f = Factory()
    index = reopen()
    state = MetaState(objects=index)
    put = f.put("k", size=5)
    batch(index, state, [f.bucket("b"), put])
    assert index.in_batch
    index.commit(2, 1234, b"rest-2")
    assert not index.in_batch
    index.close()
    again = reopen()
    try:
        assert again.applied() == (2, 1234)
        assert again.rest() == b"rest-2"
        [version] = again.versions("b", "k")
        assert version.payload_id == put["payload_id"]
        assert again.usage("b") == Usage(1, 5)
        assert again.ref_count(put["payload_id"]) == 1
    finally:
        again.close()


def test_a_batch_never_committed_leaves_what_the_last_commit_made(reopen: Opener) -> None:
    f = Factory()
    index = reopen()
    state = MetaState(objects=index)
    batch(index, state, [f.bucket("b"), f.put("kept", size=1)])
    index.commit(2, 7, b"rest")
    batch(index, state, [f.put("lost", size=2)])
    index.close()  # a process dying mid-batch
    again = reopen()
    try:
        assert again.applied() == (2, 7)
        assert [v.key for v in again.versions("b", "kept")] == ["kept"]
        assert not again.versions("b", "lost")
        assert again.usage("b") == Usage(1, 1)
    finally:
        again.close()


def test_a_commit_without_the_rest_keeps_the_stored_rest(reopen: Opener) -> None:
    f = Factory()
    index = reopen()
    state = MetaState(objects=index)
    batch(index, state, [f.bucket("b")])
    index.commit(1, 1, b"buckets")
    batch(index, state, [f.put("k")])
    index.commit(2, 2)  # an object write changes the object index alone
    index.close()
    again = reopen()
    try:
        assert again.applied() == (2, 2)
        assert again.rest() == b"buckets"
    finally:
        again.close()


def test_the_snapshot_mark_is_kept_apart_from_the_applied_mark(reopen: Opener) -> None:
    index = reopen()
    index.begin()
    index.commit(9, 99, b"rest")
    index.record_snapshot(5, 55)
    index.sync()
    index.close()
    again = reopen()
    try:
        assert again.snapshot_mark() == (5, 55)
        assert again.applied() == (9, 99)
    finally:
        again.close()


def test_a_wipe_leaves_an_empty_index_of_the_current_layout(reopen: Opener) -> None:
    f = Factory()
    index = reopen()
    state = MetaState(objects=index)
    batch(index, state, [f.bucket("b"), f.put("k", size=3)])
    index.commit(2, 2, b"rest")
    index.wipe()
    index.close()
    again = reopen()
    try:
        assert again.applied() == (0, 0)
        assert again.rest() is None
        assert again.usages() == {}
        assert again.format() == FORMAT
    finally:
        again.close()


def test_a_reader_sees_the_committed_rows_of_a_bucket(reopen: Opener) -> None:
    f = Factory()
    index = reopen()
    state = MetaState(objects=index)
    batch(index, state, [f.bucket("b"), f.put("x"), f.put("y"), f.put("z")])
    index.commit(4, 4, b"rest")
    reader = index.reader()
    try:
        assert reader.count("b") == 3
        assert [key for key, _ in reader.rows("b")] == ["x", "y", "z"]
        assert reader.count("other") == 0
    finally:
        reader.close()
        index.close()


def test_clearing_stale_readers_frees_none_while_every_reader_lives(reopen: Opener) -> None:
    index = reopen()
    reader = index.reader()
    try:
        assert index.clear_stale_readers() == 0
    finally:
        reader.close()
        index.close()
