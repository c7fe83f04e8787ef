import asyncio
import errno
import hashlib
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsseam.fs import FileSystem, RealFileSystem
from service.storage import PayloadStore, StagingUpload, pipeline, run_blocking

T = TypeVar("T")


def run(
    tmp_path: str,
    body: Callable[[PayloadStore, ThreadPoolExecutor], Awaitable[T]],
    *,
    fs: FileSystem | None = None,
    durability: str = "balanced",
) -> T:
    store = PayloadStore(str(tmp_path), fs=fs or RealFileSystem(), durability=durability)  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=4) as executor:
        return asyncio.run(asyncio.wait_for(body(store, executor), timeout=30))


def read_all(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunks=st.lists(st.binary(min_size=0, max_size=700), max_size=60),
    max_in_flight=st.integers(1, 4),
    coalesce_bytes=st.integers(1, 2000),
)
def test_pipeline_writes_every_chunk_in_order(
    tmp_path: str,
    chunks: list[bytes],
    max_in_flight: int,
    coalesce_bytes: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "MIN_WRITE_BYTES", 300)  # mix gathered and direct writes

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(
            store, executor, max_in_flight=max_in_flight, coalesce_bytes=coalesce_bytes
        )
        for chunk in chunks:
            await upload.write(chunk)
        staged = await upload.finish()
        whole = b"".join(chunks)
        assert (staged.size, staged.sha256) == (len(whole), hashlib.sha256(whole).hexdigest())
        assert read_all(staged.path) == whole
        await upload.abort()

    run(tmp_path, body)


def test_thousands_of_chunks_keep_their_order_and_stay_off_the_loop_thread(
    tmp_path: str, recording_fs
) -> None:
    chunks = [os.urandom(n % 977 + 1) for n in range(3000)]
    loop_threads: set[int] = set()

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        loop_threads.add(threading.get_ident())
        upload = await StagingUpload.start(store, executor, coalesce_bytes=64 * 1024)
        for chunk in chunks:
            await upload.write(chunk)
        staged = await upload.finish()
        payload_id = store.new_payload_id()
        await run_blocking(executor, store.promote, staged, payload_id)
        assert read_all(store.layout.payload_path(payload_id)) == b"".join(chunks)

    run(tmp_path, body, fs=recording_fs, durability="strict")
    assert recording_fs.threads
    assert not recording_fs.threads & loop_threads
    assert "fsync" in recording_fs.kinds()


def test_small_chunks_are_coalesced_into_one_write_per_batch(tmp_path: str, recording_fs) -> None:
    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, coalesce_bytes=1000)
        for _ in range(100):
            await upload.write(b"x" * 100)
        await upload.finish()

    run(tmp_path, body, fs=recording_fs)
    assert recording_fs.write_sizes == [1000] * 10


def test_chunks_of_a_useful_size_are_written_as_they_are(tmp_path: str, recording_fs) -> None:
    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, coalesce_bytes=256 * 1024)
        for size in (64 * 1024, 100, 200, 64 * 1024, 64 * 1024, 64 * 1024, 10):
            await upload.write(b"q" * size)
        await upload.finish()

    run(tmp_path, body, fs=recording_fs)
    assert recording_fs.write_sizes == [64 * 1024, 300, 64 * 1024, 64 * 1024, 64 * 1024, 10]


def test_write_waits_once_max_in_flight_batches_are_pending(tmp_path: str, failing_fs) -> None:
    failing_fs.write_gate = threading.Event()

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, max_in_flight=2, coalesce_bytes=1)
        returned = 0

        async def writer() -> None:
            nonlocal returned
            for index in range(10):
                await upload.write(bytes([index]))
                returned += 1

        task = asyncio.create_task(writer())
        while returned < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        # The disk holds batch 1, batch 2 is queued: the second write is still waiting.
        assert returned == 1
        assert not task.done()
        failing_fs.write_gate.set()
        await task
        staged = await upload.finish()
        assert read_all(staged.path) == bytes(range(10))

    run(tmp_path, body, fs=failing_fs)


def test_a_failed_write_surfaces_at_the_next_call_and_keeps_no_file(
    tmp_path: str, failing_fs
) -> None:
    failing_fs.write_budget = 5000

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, coalesce_bytes=1000)
        with pytest.raises(OSError) as raised:
            for _ in range(1000):
                await upload.write(b"z" * 500)
        assert raised.value.errno == errno.ENOSPC
        with pytest.raises(OSError):
            await upload.finish()
        await upload.abort()
        await upload.abort()
        assert os.listdir(store.layout.staging_dir) == []

    run(tmp_path, body, fs=failing_fs)


def test_a_failure_in_the_last_batch_surfaces_at_finish(tmp_path: str, failing_fs) -> None:
    failing_fs.write_budget = 10

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, coalesce_bytes=1 << 20)
        await upload.write(b"more than ten bytes")
        with pytest.raises(OSError) as raised:
            await upload.finish()
        assert raised.value.errno == errno.ENOSPC
        assert os.listdir(store.layout.staging_dir) == []

    run(tmp_path, body, fs=failing_fs)


def test_abort_waits_for_the_write_in_flight_then_removes_the_file(
    tmp_path: str, failing_fs
) -> None:
    failing_fs.write_gate = threading.Event()

    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor, max_in_flight=1, coalesce_bytes=1)
        blocked_write = asyncio.create_task(upload.write(b"a"))
        await run_blocking(executor, failing_fs.write_entered.wait, 10)
        aborting = asyncio.create_task(upload.abort())
        await asyncio.sleep(0.05)
        assert not aborting.done()
        failing_fs.write_gate.set()
        await aborting
        await blocked_write
        assert os.listdir(store.layout.staging_dir) == []
        with pytest.raises(ValueError):
            await upload.write(b"b")
        with pytest.raises(ValueError):
            await upload.finish()

    run(tmp_path, body, fs=failing_fs)


def test_abort_after_finish_removes_an_unpromoted_body_but_not_a_promoted_one(
    tmp_path: str,
) -> None:
    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        rejected = await StagingUpload.start(store, executor)
        await rejected.write(b"bad digest")
        await rejected.finish()
        await rejected.abort()
        assert os.listdir(store.layout.staging_dir) == []

        accepted = await StagingUpload.start(store, executor)
        await accepted.write(b"good")
        payload_id = store.new_payload_id()
        await run_blocking(executor, store.promote, await accepted.finish(), payload_id)
        await accepted.abort()
        assert read_all(store.layout.payload_path(payload_id)) == b"good"

    run(tmp_path, body)


def test_finish_twice_is_refused(tmp_path: str) -> None:
    async def body(store: PayloadStore, executor: ThreadPoolExecutor) -> None:
        upload = await StagingUpload.start(store, executor)
        await upload.finish()
        with pytest.raises(ValueError):
            await upload.finish()

    run(tmp_path, body)


def test_run_blocking_runs_the_function_on_an_executor_thread() -> None:
    async def body() -> int:
        with ThreadPoolExecutor(max_workers=1) as executor:
            return await run_blocking(executor, threading.get_ident)

    assert asyncio.run(body()) != threading.get_ident()


def test_a_busy_upload_does_not_keep_the_only_executor_thread_to_itself(
    tmp_path: str, recording_fs
) -> None:
    recording_fs.write_delay = 0.002
    store = PayloadStore(str(tmp_path), fs=recording_fs, durability="balanced")

    async def body(executor: ThreadPoolExecutor) -> tuple[str, str]:
        busy = await StagingUpload.start(store, executor, coalesce_bytes=1)
        other = await StagingUpload.start(store, executor, coalesce_bytes=1)

        async def feed(upload: StagingUpload, count: int) -> str:
            for _ in range(count):
                await upload.write(b"x" * 1000)
            return (await upload.finish()).path

        return await asyncio.gather(feed(busy, 100), feed(other, 5))

    with ThreadPoolExecutor(max_workers=1) as executor:
        busy_path, other_path = asyncio.run(body(executor))
    writers = [path for kind, path in recording_fs.events if kind == "write"]
    assert writers.count(busy_path) == 100
    # The other upload's last write lands long before the busy one's: they took turns.
    assert max(i for i, p in enumerate(writers) if p == other_path) < 40
