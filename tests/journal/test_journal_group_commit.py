"""Group commit, listener ordering, fail-stop and the API's guard rails."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import threading

import pytest

from fsseam import crashpoints
from fsseam.simfs import SimFileSystem
from journal import (
    Journal,
    JournalClosedError,
    JournalError,
    JournalFailedError,
    JournalOptions,
    Record,
)
from tests.journal.journal_testkit import event, reopen_async, sequences

DIRECTORY = "/data/journal"


def open_sim(
    fs: SimFileSystem, options: JournalOptions | None = None, directory: str = DIRECTORY
) -> Journal:
    journal = Journal.open(directory, options or JournalOptions(), fs)
    assert list(journal.replay()) == []
    return journal


def test_concurrent_appends_share_batches_and_keep_call_order() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        fsyncs_before = fs.counts["fsync"]
        seen: list[int] = []
        journal.listener = lambda record: seen.append(record.sequence)
        results = await asyncio.gather(*(journal.append(event(n)) for n in range(1, 101)))
        stats = journal.stats()
        assert results == list(range(1, 101))
        assert seen == list(range(1, 101))
        assert stats.appends == 100
        assert stats.batches < stats.appends
        assert fs.counts["fsync"] - fsyncs_before == stats.batches
        await journal.close()
        assert sequences((await reopen_async(DIRECTORY, fs=fs)).records) == list(range(1, 101))

    asyncio.run(main())


def test_many_writers_in_a_loop_form_large_batches() -> None:
    async def main() -> None:
        journal = open_sim(SimFileSystem())

        async def writer(number: int) -> None:
            for round_ in range(5):
                await journal.append(event(number * 10 + round_))

        await asyncio.gather(*(writer(number) for number in range(64)))
        stats = journal.stats()
        assert stats.appends == 320
        assert stats.batches <= 10  # about one batch per round, not one per append
        await journal.close()

    asyncio.run(main())


def test_listener_sees_the_record_before_append_resumes() -> None:
    async def main() -> None:
        journal = open_sim(SimFileSystem())
        applied: list[Record] = []
        journal.listener = applied.append
        sequence = await journal.append(event(1))
        assert applied == [Record(sequence, event(1))]
        await journal.close()

    asyncio.run(main())


def test_next_batch_accumulates_while_one_is_flushed() -> None:
    written = threading.Event()
    release = threading.Event()

    def hook(name: str) -> None:
        if name == "journal.append.after_write" and not written.is_set():
            written.set()
            release.wait(5)

    async def main() -> None:
        journal = open_sim(SimFileSystem())
        first = asyncio.ensure_future(journal.append(event(1)))
        await asyncio.get_running_loop().run_in_executor(None, written.wait, 5)
        rest = [asyncio.ensure_future(journal.append(event(n))) for n in range(2, 7)]
        await asyncio.sleep(0.01)
        assert not first.done()
        release.set()
        assert await asyncio.gather(first, *rest) == [1, 2, 3, 4, 5, 6]
        assert journal.stats().batches == 2
        await journal.close()

    crashpoints.set_hook(hook)
    try:
        asyncio.run(main())
    finally:
        crashpoints.set_hook(None)


def test_fsync_failure_fails_every_waiter_of_the_batch_and_every_later_append() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        await journal.append(event(1))
        fs.fail_at(fs.operations, errno.EIO, operations={"fsync"})
        results = await asyncio.gather(
            *(journal.append(event(n)) for n in range(2, 12)), return_exceptions=True
        )
        assert all(isinstance(result, JournalFailedError) for result in results)
        assert isinstance(results[0], JournalFailedError)
        assert isinstance(results[0].__cause__, OSError)
        assert journal.failed
        fsyncs = fs.counts["fsync"]
        with pytest.raises(JournalFailedError):
            await journal.append(event(12))
        with pytest.raises(JournalFailedError):
            await journal.write_snapshot(1, b"state")
        await journal.close()
        assert fs.counts["fsync"] == fsyncs  # never retried, not even at close

    asyncio.run(main())


def test_write_failure_is_fail_stop_and_the_batch_is_lost_or_torn() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        await journal.append(event(1))
        fs.fail_at(fs.operations, errno.ENOSPC, operations={"write"})
        with pytest.raises(JournalFailedError):
            await journal.append(event(2))
        assert journal.failed
        with pytest.raises(JournalFailedError):
            await journal.append(event(3))
        await journal.close()

    asyncio.run(main())


def test_waiters_queued_behind_a_failing_batch_fail_too() -> None:
    written = threading.Event()
    release = threading.Event()

    def hook(name: str) -> None:
        if name == "journal.append.after_write" and not written.is_set():
            written.set()
            release.wait(5)
            raise OSError(errno.EIO, "simulated write-back failure")

    async def main() -> None:
        journal = open_sim(SimFileSystem())
        first = asyncio.ensure_future(journal.append(event(1)))
        await asyncio.get_running_loop().run_in_executor(None, written.wait, 5)
        queued = [asyncio.ensure_future(journal.append(event(n))) for n in range(2, 5)]
        await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(first, *queued, return_exceptions=True)
        assert all(isinstance(result, JournalFailedError) for result in results)
        await journal.close()

    crashpoints.set_hook(hook)
    try:
        asyncio.run(main())
    finally:
        crashpoints.set_hook(None)


def test_strict_append_is_durable_when_it_resolves() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        for number in range(1, 4):
            await journal.append(event(number))
        image = fs.crash_image("lose_unsynced")
        assert sequences((await reopen_async(DIRECTORY, fs=image)).records) == [1, 2, 3]
        await journal.close()

    asyncio.run(main())


def test_balanced_append_resolves_after_write_without_fsync() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs, JournalOptions(durability="balanced"))
        fsyncs = fs.counts["fsync"]
        for number in range(1, 4):
            await journal.append(event(number))
        assert fs.counts["fsync"] == fsyncs
        assert sequences(
            (await reopen_async(DIRECTORY, fs=fs.crash_image("keep_unsynced"))).records
        ) == [
            1,
            2,
            3,
        ]
        assert (await reopen_async(DIRECTORY, fs=fs.crash_image("lose_unsynced"))).records == []
        await journal.close()
        assert fs.counts["fsync"] == fsyncs + 1  # a clean close loses nothing
        assert len((await reopen_async(DIRECTORY, fs=fs.crash_image("lose_unsynced"))).records) == 3

    asyncio.run(main())


def test_balanced_snapshot_makes_the_log_durable_first() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs, JournalOptions(durability="balanced"))
        for number in range(1, 6):
            await journal.append(event(number))
        await journal.write_snapshot(5, b"state 5")
        await journal.append(event(6))
        opened = await reopen_async(DIRECTORY, fs=fs.crash_image("lose_unsynced"))
        assert opened.snapshot is not None and opened.snapshot.sequence == 5
        assert opened.records == []
        await journal.close()

    asyncio.run(main())


def test_listener_error_fails_only_its_own_append() -> None:
    async def main() -> None:
        journal = open_sim(SimFileSystem())

        def listener(record: Record) -> None:
            if record.sequence == 2:
                raise KeyError("bad state")

        journal.listener = listener
        results = await asyncio.gather(
            *(journal.append(event(n)) for n in range(1, 4)), return_exceptions=True
        )
        assert results[0] == 1 and results[2] == 3
        assert isinstance(results[1], KeyError)
        assert not journal.failed
        await journal.close()

    asyncio.run(main())


def test_close_flushes_queued_appends_and_later_appends_raise() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        pending = [asyncio.ensure_future(journal.append(event(n))) for n in range(1, 6)]
        await asyncio.sleep(0)
        await journal.close()
        assert [future.result() for future in pending] == [1, 2, 3, 4, 5]
        with pytest.raises(JournalClosedError):
            await journal.append(event(6))
        assert len((await reopen_async(DIRECTORY, fs=fs.crash_image("lose_unsynced"))).records) == 5

    asyncio.run(main())


def test_append_waits_for_replay_to_be_exhausted() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        await journal.append(event(1))
        await journal.close()
        reopened = Journal.open(DIRECTORY, fs=fs)
        with pytest.raises(RuntimeError):
            await reopened.append(event(2))
        assert [record.sequence for record in reopened.replay()] == [1]
        assert await reopened.append(event(2)) == 2
        with pytest.raises(RuntimeError):
            reopened.replay()
        await reopened.close()

    asyncio.run(main())


def test_append_rejects_what_is_not_an_event() -> None:
    async def main() -> None:
        journal = open_sim(SimFileSystem(), JournalOptions(max_record_bytes=100))
        with pytest.raises(TypeError):
            await journal.append(["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await journal.append({"no": "type"})
        with pytest.raises(ValueError):
            await journal.append({"type": "Big", "blob": b"x" * 200})
        with pytest.raises(TypeError):
            await journal.append({"type": "Odd", "value": object()})
        assert await journal.append(event(1)) == 1  # nothing above consumed a sequence
        await journal.close()

    asyncio.run(main())


def test_write_snapshot_rejects_unacknowledged_or_older_sequences() -> None:
    async def main() -> None:
        journal = open_sim(SimFileSystem())
        await journal.append(event(1))
        await journal.append(event(2))
        with pytest.raises(ValueError):
            await journal.write_snapshot(3, b"future")
        await journal.write_snapshot(2, b"two")
        with pytest.raises(ValueError):
            await journal.write_snapshot(1, b"older")
        await journal.close()

    asyncio.run(main())


def test_failed_snapshot_write_raises_and_leaves_the_log_usable() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs)
        await journal.append(event(1))
        fs.fail_at(fs.operations, errno.ENOSPC, operations={"write"})
        with pytest.raises(JournalError) as raised:
            await journal.write_snapshot(1, b"state")
        assert not isinstance(raised.value, JournalFailedError)
        assert not journal.failed
        assert await journal.append(event(2)) == 2
        await journal.close()
        assert not [name for name in fs.listdir(DIRECTORY) if name.endswith(".tmp")]
        assert (await reopen_async(DIRECTORY, fs=fs)).snapshot is None

    asyncio.run(main())


def test_stats_report_the_log() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs, JournalOptions(segment_bytes=120))
        for number in range(1, 6):
            await journal.append(event(number))
        await journal.write_snapshot(4, b"four")
        stats = journal.stats()
        assert stats.last_sequence == 5
        assert stats.last_snapshot_sequence == 4
        assert stats.last_snapshot_at is not None
        assert stats.appends == 5 and stats.batches == 5
        on_disk = [name for name in fs.listdir(DIRECTORY) if name.startswith("segment-")]
        assert stats.segments == len(on_disk) >= 2
        sizes = sum(fs.stat(f"{DIRECTORY}/{name}").size for name in fs.listdir(DIRECTORY))
        assert stats.bytes == sizes
        await journal.close()
        reopened = Journal.open(DIRECTORY, fs=fs)
        assert reopened.stats().replay_seconds is None
        list(reopened.replay())
        after = reopened.stats()
        assert after.replay_seconds is not None and after.replay_seconds > 0
        assert (after.last_sequence, after.appends) == (5, 0)
        await reopened.close()

    asyncio.run(main())


def test_a_supplied_executor_runs_the_file_work() -> None:
    threads: set[str] = set()

    def hook(name: str) -> None:
        threads.add(threading.current_thread().name)

    async def main() -> None:
        with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="mine") as executor:
            journal = open_sim(SimFileSystem(), JournalOptions(executor=executor))
            await asyncio.gather(*(journal.append(event(n)) for n in range(1, 4)))
            await journal.close()
            assert not executor._shutdown  # the caller's executor stays the caller's

    crashpoints.set_hook(hook)
    try:
        asyncio.run(main())
    finally:
        crashpoints.set_hook(None)
    assert threads and all(name.startswith("mine") for name in threads)


def test_records_seen_at_open_are_made_durable_before_new_ones_claim_them() -> None:
    fs = SimFileSystem()
    balanced = JournalOptions(durability="balanced")

    async def killed_process() -> None:
        journal = open_sim(fs, balanced)
        for number in range(1, 4):
            await journal.append(event(number))
        # killed: no close, the records are only in the page cache

    async def next_process() -> None:
        journal = Journal.open(DIRECTORY, balanced, fs)
        assert sequences(list(journal.replay())) == [1, 2, 3]
        await journal.append(event(4))  # claims 1..3 durable

    asyncio.run(killed_process())
    asyncio.run(next_process())
    for seed in range(5):
        opened = asyncio.run(reopen_async(DIRECTORY, fs=fs.crash_image("random_subset", seed)))
        assert sequences(opened.records)[:3] == [1, 2, 3]


def test_appenders_woken_by_a_batch_join_the_batch_queued_behind_it() -> None:
    written = threading.Event()
    release = threading.Event()

    def hook(name: str) -> None:
        if name == "journal.append.after_write" and not written.is_set():
            written.set()
            release.wait(5)

    async def main() -> None:
        journal = open_sim(SimFileSystem())

        async def appends_twice() -> None:
            await journal.append(event(1))
            await journal.append(event(7))

        first = asyncio.ensure_future(appends_twice())
        await asyncio.get_running_loop().run_in_executor(None, written.wait, 5)
        queued = [asyncio.ensure_future(journal.append(event(n))) for n in range(2, 7)]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, *queued)
        assert journal.stats().batches == 2  # [1] then [2..6, 7], not [2..6] then [7]
        await journal.close()

    crashpoints.set_hook(hook)
    try:
        asyncio.run(main())
    finally:
        crashpoints.set_hook(None)


def test_sync_makes_balanced_records_durable_once() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs, JournalOptions(durability="balanced"))
        for number in range(1, 4):
            await journal.append(event(number))
        fsyncs = fs.counts["fsync"]
        await journal.sync()
        await journal.sync()  # nothing new: no second fsync
        assert fs.counts["fsync"] == fsyncs + 1
        opened = await reopen_async(DIRECTORY, fs=fs.crash_image("lose_unsynced"))
        assert sequences(opened.records) == [1, 2, 3]
        await journal.close()

    asyncio.run(main())


def test_failed_sync_is_fail_stop() -> None:
    async def main() -> None:
        fs = SimFileSystem()
        journal = open_sim(fs, JournalOptions(durability="balanced"))
        await journal.append(event(1))
        fs.fail_at(fs.operations, errno.EIO, operations={"fsync"})
        with pytest.raises(JournalFailedError):
            await journal.sync()
        assert journal.failed
        with pytest.raises(JournalFailedError):
            await journal.append(event(2))
        await journal.close()

    asyncio.run(main())
