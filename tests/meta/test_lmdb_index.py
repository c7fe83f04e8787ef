"""The LMDB object index behaves as the in-memory one (issue 12).

The model-based state machine of ``test_meta_properties`` runs again with the object
versions in LMDB: every outcome, every key's versions, usage, payload references, snapshot
round trips and every listing page (random limits, prefixes, delimiters; objects and
versions) must match the naive model, and a snapshot streamed from the index's read
transaction is byte for byte the one encoded from decoded records. Batches commit atomically
with their sequence.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from service.index.lmdb_index import LmdbObjectIndex
from service.meta import MetaState, encode_snapshot
from service.meta.model import Usage
from tests.meta.factory import Factory, applied
from tests.meta.test_meta_properties import MetaMachine


class LmdbMetaMachine(MetaMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="lmdb-index-")
        self.index = LmdbObjectIndex(self.directory)
        self.state = MetaState(objects=self.index)

    @invariant()
    def a_snapshot_streamed_from_the_index_is_byte_for_byte_the_decoded_one(self) -> None:
        stored = self.index.reader()
        try:
            streamed = encode_snapshot(self.state.freeze(objects=False), stored)
        finally:
            stored.close()
        assert streamed == encode_snapshot(self.state)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.index.close()
            shutil.rmtree(self.directory, ignore_errors=True)


LmdbMetaMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLmdbIndexAgainstModel = LmdbMetaMachine.TestCase


def test_every_page_size_lists_each_key_once_in_order(tmp_path: Path) -> None:
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    f = Factory()
    applied(state, f.bucket("b"))
    keys = [f"d{d}/f{i}" for d in range(3) for i in range(4)] + ["top", "d1/", "\u00e9"]
    for key in keys:
        applied(state, f.put(key))
    applied(state, f.delete("d0/f1"))
    live = sorted(k for k in keys if k != "d0/f1")
    for limit in range(1, len(keys) + 2):
        seen: list[str] = []
        marker = None
        while True:
            page = state.list_objects("b", limit=limit, start_after=marker)
            seen += [o.key for o in page.objects]
            marker = page.last_item
            if not page.truncated:
                break
        assert seen == live
        top = state.list_objects("b", delimiter="/", limit=limit)
        assert len(top.objects) + len(top.common_prefixes) == min(limit, 5)
    index.close()


def test_a_batch_commits_its_effects_and_its_sequence_together(tmp_path: Path) -> None:
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    f = Factory()
    applied(state, f.bucket("b"))
    assert index.applied() == (0, 0)
    index.begin()
    applied(state, f.put("k1"))
    assert state.head_object("b", "k1") is not None  # the batch reads its own writes
    index.commit(7, 99)
    index.begin()
    applied(state, f.put("k2"))
    index.close()  # the open batch is lost, as a crash loses it
    reopened = LmdbObjectIndex(str(tmp_path))
    assert reopened.applied() == (7, 99)
    assert reopened.versions("b", "k1") and not reopened.versions("b", "k2")
    reopened.close()


def test_a_batchs_usage_is_read_back_in_it_and_written_only_by_its_commit(tmp_path: Path) -> None:
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    f = Factory()
    applied(state, f.bucket("b"))
    applied(state, f.bucket("gone"))
    index.begin()
    for key in ("k1", "k2", "k3"):
        applied(state, f.put(key, size=3))
    applied(state, f.drop_bucket("gone"))
    assert state.bucket_usage("b") == Usage(3, 9)  # the batch reads its own usage
    assert index.usages() == {"b": Usage(3, 9)}
    index.commit(5, 1)
    index.begin()
    applied(state, f.put("k4", size=4))
    assert index.usage("b") == Usage(4, 13)
    index.close()  # the open batch is lost, its usage with it
    reopened = LmdbObjectIndex(str(tmp_path))
    assert reopened.usages() == {"b": Usage(3, 9)}
    reopened.close()


def test_a_dropped_bucket_leaves_nothing_behind(tmp_path: Path) -> None:
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    f = Factory()
    applied(state, f.bucket("b"))
    applied(state, f.bucket("b2"))
    applied(state, f.put("k"))
    applied(state, f.put("k", bucket="b2"))
    outcome = applied(state, f.drop_bucket("b", force=True))
    assert len(outcome.released_payloads) == 1
    assert not index.holds_any("b") and index.holds_any("b2")
    assert list(index.image()) == ["b2"]
    index.close()


def test_keys_past_lmdbs_key_limit_are_stored_listed_and_deleted(tmp_path: Path) -> None:
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    memory = MetaState()
    f = Factory()
    long = "l" * 470
    keys = [long, long + "a", long + "b" * 600, long + "\u00e9" * 200, long + "a/" + "c" * 500]
    keys += ["x" * 1024, "x" * 1023, "x" * 1024 + "/y", "a", "z" * 480]
    for event in [f.bucket("b"), *(f.put(key) for key in keys), f.delete(long + "a")]:
        assert state.apply(event) == memory.apply(event)
    for key in keys:
        assert state.object_versions("b", key) == memory.object_versions("b", key)
    for limit in range(1, len(keys) + 2):
        for delimiter in (None, "/"):
            marker = None
            while True:
                page = state.list_objects("b", delimiter=delimiter, limit=limit, start_after=marker)
                assert page == memory.list_objects(
                    "b", delimiter=delimiter, limit=limit, start_after=marker
                )
                marker = page.last_item
                if not page.truncated:
                    break
        versions = state.list_versions("b", limit=limit)
        assert versions == memory.list_versions("b", limit=limit)
    assert encode_snapshot(state) == encode_snapshot(memory)
    stored = index.reader()
    try:
        assert encode_snapshot(state.freeze(objects=False), stored) == encode_snapshot(memory)
    finally:
        stored.close()
    drop = f.drop_bucket("b", force=True)
    assert state.apply(drop) == memory.apply(drop)
    assert not index.holds_any("b") and index.image() == {}
    index.close()


def test_object_pages_walked_in_bytes_equal_the_in_memory_pages(tmp_path: Path) -> None:
    """Every prefix (one longer than an LMDB key too), delimiter (multi-byte ones too),
    cursor and page size over keys with several versions, delete markers and long keys:
    the LMDB walk pages as the model does."""
    index = LmdbObjectIndex(str(tmp_path))
    state = MetaState(objects=index)
    memory = MetaState()
    f = Factory()
    keys = ["a", "a/b", "a/b/c", "a/c", "a\u00e9b", "a\u00e9\u00e9", "b\u00e9", "b/", "c//d"]
    keys += ["d" * 479 + "/x", "d" * 500 + "/y", "d" * 500, "\U0001f600/k", "\u00e9"]
    events = [f.bucket("b", versioning=True), *(f.put(key) for key in keys)]
    events += [f.put("a/b"), f.put("a/b"), f.delete("a/c"), f.delete("b/"), f.put("b/")]
    for event in events:
        assert state.apply(event) == memory.apply(event)
    markers = [None, "", "a/", "a/b", "a\u00e9", "b", "zz", *keys]
    for prefix in ("", "a", "a/", "a\u00e9", "d" * 479, "\U0001f600", "q"):
        for delimiter in (None, "/", "\u00e9", "//", "\U0001f600"):
            for limit in (1, 2, 3, 1000):
                for marker in markers:
                    args = ("b", prefix, delimiter, limit, marker)
                    assert state.list_objects(*args) == memory.list_objects(*args), args
        for limit in (1, 1000):
            versions = state.list_versions("b", prefix, limit)
            assert versions == memory.list_versions("b", prefix, limit), (prefix, limit)
    index.close()
