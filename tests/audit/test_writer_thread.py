"""The audit log's group-commit thread (``service.audit.writer_thread``): groups handed over
while a batch is written become the next batch, jobs keep their place in the order, results
come back on the event loop, and shutdown ends the thread; a closed log takes no record."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from fsseam.fs import RealFileSystem
from service.audit.log import AuditLog, AuditUnavailableError
from service.audit.writer_thread import GroupCommitThread


class Recorder:
    """A ``write`` that notes each batch, and can be held in the middle of one."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self.settled: list[tuple[list[Any], int, bool]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.writing = threading.Event()
        self.loop_thread = threading.get_ident()

    def write(self, batch: list[Any]) -> int | None:
        self.writing.set()
        self.hold.wait()
        self.batches.append(list(batch))
        return None if batch == ["quiet"] else len(self.batches)

    def settle(self, batch: list[Any], outcome: int) -> None:
        self.settled.append((batch, outcome, threading.get_ident() == self.loop_thread))


async def until(condition: Any) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


def test_groups_handed_over_during_a_write_become_one_batch() -> None:
    async def scenario() -> Recorder:
        recorder = Recorder()
        thread = GroupCommitThread(recorder.write, recorder.settle, name="test-audit")
        recorder.hold.clear()
        thread.hand_over([1], asyncio.get_running_loop())
        await asyncio.get_running_loop().run_in_executor(None, recorder.writing.wait)
        thread.hand_over([2, 3], asyncio.get_running_loop())
        thread.hand_over([4], asyncio.get_running_loop())
        recorder.hold.set()
        await until(lambda: len(recorder.settled) == 2)
        thread.shutdown()
        return recorder

    recorder = asyncio.run(scenario())
    assert recorder.batches == [[1], [2, 3, 4]]
    assert recorder.settled == [([1], 1, True), ([2, 3, 4], 2, True)]


def test_a_job_runs_after_the_records_handed_over_before_it() -> None:
    async def scenario() -> tuple[Recorder, list[int]]:
        recorder = Recorder()
        thread = GroupCommitThread(recorder.write, recorder.settle, name="test-audit")
        thread.hand_over([1, 2], asyncio.get_running_loop())
        written = await thread.run(lambda: len(recorder.batches))
        thread.hand_over([3], asyncio.get_running_loop())
        again = await thread.run(lambda: len(recorder.batches))
        thread.shutdown()
        return recorder, [written, again]

    recorder, seen = asyncio.run(scenario())
    assert seen == [1, 2]
    assert recorder.batches == [[1, 2], [3]]


def test_no_settle_when_no_one_waits_and_a_job_raises_to_its_caller() -> None:
    async def scenario() -> Recorder:
        recorder = Recorder()
        thread = GroupCommitThread(recorder.write, recorder.settle, name="test-audit")
        thread.hand_over(["quiet"], asyncio.get_running_loop())

        def broken() -> None:
            raise OSError("no space")

        with pytest.raises(OSError, match="no space"):
            await thread.run(broken)
        await thread.run(lambda: None)
        thread.shutdown()
        return recorder

    recorder = asyncio.run(scenario())
    assert recorder.batches == [["quiet"]]
    assert recorder.settled == []


def test_after_shutdown_the_thread_ends_and_takes_nothing() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        thread = GroupCommitThread(recorder.write, recorder.settle, name="test-audit")
        thread.hand_over([1], asyncio.get_running_loop())
        thread.shutdown(wait=True)
        assert recorder.batches == [[1]]  # what was handed over before is done first
        assert not any(t.name == "test-audit" for t in threading.enumerate())
        with pytest.raises(RuntimeError):
            thread.hand_over([2], asyncio.get_running_loop())
        with pytest.raises(RuntimeError):
            await thread.run(lambda: None)

    asyncio.run(scenario())


def test_a_thread_whose_owner_is_dropped_ends() -> None:
    async def scenario() -> threading.Thread:
        recorder = Recorder()
        owner = GroupCommitThread(recorder.write, recorder.settle, name="test-audit-dropped")
        owner.hand_over([1], asyncio.get_running_loop())
        await owner.run(lambda: None)
        thread = owner._thread
        del owner  # no shutdown: what a simulated crash leaves
        gc.collect()
        return thread

    thread = asyncio.run(scenario())
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_a_closed_log_refuses_records_and_its_flush_returns(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = AuditLog(
            RealFileSystem(), str(tmp_path), secret=b"k" * 32, strict=True, retention_seconds=3600
        )
        await log.open()
        wait = log.append({"time": "2026-11-28T07:00:00.000Z", "request_id": "a"})
        assert wait is not None and await wait == 1
        await log.close()
        await log.flush()
        with pytest.raises(AuditUnavailableError):
            log.append({"time": "2026-11-28T07:00:00.001Z", "request_id": "late"})

    asyncio.run(scenario())
