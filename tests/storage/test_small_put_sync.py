"""Strict small PUTs through the real engine on the real disk: they share ``syncfs`` calls
instead of fsyncing each file, and a failed sync acknowledges none of the PUTs it covered;
the balanced checkpoint's ``syncfs``, and its way back to fsyncs after a failure.
"""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from fsseam.fs import FsSync, RealFileSystem
from service.common.api_errors import ApiError
from service.config import Config
from service.engine.core import Engine
from service.engine.journaled import journaled_engine
from service.ops import buckets, objects
from service.ops.objects import PutIntent
from service.storage import PayloadIntegrity, PayloadStore
from tests.storage.conftest import RecordingFileSystem

if RealFileSystem().open_syncfs("/") is None:
    pytest.skip("no trustworthy syncfs here (Linux >= 5.8)", allow_module_level=True)


class FailingSync:
    """The real ``syncfs`` handle, failing with EIO for the calls numbered in ``fail``."""

    def __init__(self, inner: FsSync, fail: set[int]) -> None:
        self.inner = inner
        self.fail = fail
        self.calls = 0

    def sync(self) -> None:
        self.calls += 1
        self.inner.sync()
        if self.calls in self.fail:
            raise OSError(errno.EIO, "writeback failed")

    def close(self) -> None:
        self.inner.close()


class SyncRecordingFileSystem(RecordingFileSystem):
    """Records fsyncs (``RecordingFileSystem``); its syncfs handle fails as told."""

    def __init__(self, fail: set[int]) -> None:
        super().__init__()
        self.fail = fail
        self.handle: FailingSync | None = None

    def open_syncfs(self, path: str) -> FsSync | None:
        inner = super().open_syncfs(path)
        assert inner is not None
        self.handle = FailingSync(inner, self.fail)
        return self.handle


def config(data_dir: Path) -> Config:
    return Config(
        data_dir=str(data_dir),
        durability="strict",
        gc_interval=1e9,
        snapshot_interval=1e9,
        snapshot_every=10**9,
    )


async def started(tmp_path: Path, fs: SyncRecordingFileSystem) -> Engine:
    engine, _ = journaled_engine(config(tmp_path / "data"), fs=fs)
    await engine.start()
    await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
    return engine


async def put(engine: Engine, key: str, body: bytes) -> str:
    """'ok', or the error code the PUT answers."""
    intent = PutIntent(bucket="bkt", key=key, content_length=len(body))
    try:
        objects.precheck_put(engine, intent)
        await objects.store_small_object(engine, intent, body)
    except ApiError as error:
        return error.code
    return "ok"


def test_concurrent_small_puts_share_syncs_and_fsync_no_payload(tmp_path: Path) -> None:
    fs = SyncRecordingFileSystem(fail=set())

    async def main() -> None:
        engine = await started(tmp_path, fs)
        assert engine.payload_sync is not None
        fs.events.clear()
        bodies = {f"k{n}": os.urandom(4096) for n in range(40)}
        results = await asyncio.gather(*(put(engine, k, v) for k, v in bodies.items()))
        assert results == ["ok"] * 40
        # One sync led by the first PUT, the others shared by the rest.
        assert 1 <= engine.payload_sync.syncs < 40
        assert fs.handle is not None and fs.handle.calls == engine.payload_sync.syncs
        fsynced = [path for kind, path in fs.events if kind == "fsync"]
        assert fsynced  # the journal's (group commit)
        assert not [path for path in fsynced if "/payloads/" in path or "/staging/" in path]
        # Directory fsyncs only for the fan-out directories the run of ids created (ids
        # handed out together share their leaf), never one per PUT.
        created = [p for kind, p in fs.events if kind == "mkdir"]
        dir_fsyncs = [p for kind, p in fs.events if kind == "fsync_dir" and "/payloads" in p]
        assert len(dir_fsyncs) <= len(created) <= 2
        for key, body in bodies.items():
            version = engine.state.head_object("bkt", key, None)
            assert version is not None
            source = engine.store.open_payload(version.payload_id)
            try:
                assert source.read() == body
            finally:
                source.close()
        await engine.stop()

    asyncio.run(main())


def test_a_failed_sync_answers_every_put_it_covered_and_acknowledges_none(
    tmp_path: Path,
) -> None:
    fs = SyncRecordingFileSystem(fail={1})

    async def main() -> None:
        engine = await started(tmp_path, fs)
        results = await asyncio.gather(*(put(engine, f"k{n}", b"x" * 100) for n in range(8)))
        # Every PUT took its ticket before the first (failing) sync ended.
        assert results == ["InternalError"] * 8
        assert all(engine.state.head_object("bkt", f"k{n}", None) is None for n in range(8))
        assert engine.read_only_reason is None  # the journal is untouched: serving goes on
        assert await put(engine, "after", b"later") == "ok"
        assert engine.state.head_object("bkt", "after", None) is not None
        await engine.stop()

    asyncio.run(main())


def test_a_balanced_checkpoint_syncs_once_and_after_a_failure_fsyncs_each_payload(
    tmp_path: Path,
) -> None:
    fs = SyncRecordingFileSystem(fail={1})
    store = PayloadStore(str(tmp_path), fs=fs, durability="balanced")
    assert store.fs_sync is fs.handle is not None
    integrity = PayloadIntegrity(fs, store.layout, store.fs_sync)
    ids = [store.next_payload_id() for _ in range(3)]
    for payload_id in ids:
        store.store_small(b"body", payload_id)
    fs.events.clear()
    with pytest.raises(OSError):
        integrity.sync_payloads(ids)  # the one syncfs fails: nothing is known durable
    assert fs.handle.calls == 1
    integrity.sync_payloads(ids)  # the retry fsyncs each payload and its directories
    assert fs.handle.calls == 1
    assert ("fsync_dir", store.layout.payload_dir(ids[0])) in fs.events
