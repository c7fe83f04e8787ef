"""The one chain that several processes append to (``service.audit.shared``): real processes
appending at once give one gapless chain that verifies, each process's records in its own
order; a process SIGKILLed at any point of its append (mid-line, after its lines but before
the head, between naming and making a segment) leaves nothing the next holder of the lock
does not repair, and every acknowledged record stays; a torn line is cut; a failed write in
one process stops the others until it is restarted."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from fsseam.fs import RealFileSystem
from fsseam.simfs import SimFileSystem
from fsseam.simfs_faults import Fault
from service.audit.log import AuditLog, AuditUnavailableError
from service.audit.segments import list_segments
from service.audit.shared import TAIL_CUT
from tests.audit.appender import SECRET, fields

T = TypeVar("T")
PROJECT = Path(__file__).resolve().parent.parent.parent
SMALL_SEGMENTS = 4096
"""About a dozen records a segment: the processes roll segments under each other."""


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def make_log(root: Path, *, strict: bool = True, segment_bytes: int = SMALL_SEGMENTS) -> AuditLog:
    return AuditLog(
        RealFileSystem(),
        str(root),
        secret=SECRET,
        strict=strict,
        retention_seconds=86400.0,
        segment_bytes=segment_bytes,
    )


class Appender:
    """One ``tests.audit.appender`` process, opened and waiting for its go."""

    def __init__(
        self, root: Path, name: str, count: int, point: str = "-", durability: str = "strict"
    ) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.audit.appender", str(root), name, str(count)),
                *(point, str(SMALL_SEGMENTS), durability),
            ],
            cwd=PROJECT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def finish(self) -> tuple[int, dict[str, int]]:
        """The exit status and the acknowledged records (request id -> sequence)."""
        out, _ = self.process.communicate(timeout=120)
        acked = {}
        for line in out.splitlines():
            _, request_id, sequence = line.split()
            acked[request_id] = int(sequence)
        return self.process.returncode, acked


def chain(root: Path) -> list[dict[str, Any]]:
    """Every record, after a start (which cuts what a killed process left) verified it."""

    async def read() -> list[dict[str, Any]]:
        log = make_log(root)
        await log.open()
        result = await log.verify()
        assert result.ok, (result.first_bad_sequence, result.problem)
        records, after = await log.page(0, 1000, None, None)
        assert after is None
        await log.close()
        return records

    return run(read())


def check_chain(records: list[dict[str, Any]], *acked: dict[str, int]) -> None:
    """Gapless from 1; each request at most once; each process's records in its order;
    every acknowledged record where its acknowledgement said."""
    assert [r["sequence"] for r in records] == list(range(1, len(records) + 1))
    by_request = {r["request_id"]: r for r in records if r["action"] != TAIL_CUT}
    assert len(by_request) == len([r for r in records if r["action"] != TAIL_CUT])
    for name in {request_id.split("-")[0] for request_id in by_request}:
        own = [r for r in records if r["request_id"].startswith(f"{name}-")]
        assert [int(r["request_id"].split("-")[1]) for r in own] == list(range(len(own)))
    for each in acked:
        for request_id, sequence in each.items():
            assert request_id in by_request, f"acknowledged {request_id} is not in the chain"
            if sequence:  # strict: the sequence the log answered
                assert by_request[request_id]["sequence"] == sequence


@pytest.mark.parametrize("durability", ["strict", "balanced"])
def test_two_processes_appending_at_once_make_one_chain(tmp_path: Path, durability: str) -> None:
    first = Appender(tmp_path, "a", 240, durability=durability)
    second = Appender(tmp_path, "b", 240, durability=durability)
    first.go()
    second.go()
    (status_a, acked_a), (status_b, acked_b) = first.finish(), second.finish()
    assert (status_a, status_b) == (0, 0)
    assert len(acked_a) == len(acked_b) == 240
    records = chain(tmp_path)
    assert len(records) == 480
    check_chain(records, acked_a, acked_b)
    assert len(list_segments(RealFileSystem(), str(tmp_path / "audit"))) > 10
    interleaved = sum(1 for x, y in itertools.pairwise(records) if x["key"][0] != y["key"][0])
    assert interleaved > 1, "the processes took turns at the chain's end"


@pytest.mark.parametrize(
    "point",
    [
        "audit.append.mid_write:7",
        "audit.append.after_write:7",
        "audit.append.after_fsync:7",
        "audit.segment.named:2",
        "audit.segment.roll:2",
    ],
)
def test_a_process_killed_in_its_append_leaves_a_chain_the_other_repairs(
    tmp_path: Path, point: str
) -> None:
    victim = Appender(tmp_path, "a", 120, point)
    survivor = Appender(tmp_path, "b", 60)
    victim.go()
    status, acked_victim = victim.finish()
    assert status == -signal.SIGKILL
    survivor.go()  # its first batch finds what the killed one left, under the lock
    status, acked_survivor = survivor.finish()
    assert status == 0 and len(acked_survivor) == 60
    records = chain(tmp_path)
    check_chain(records, acked_victim, acked_survivor)
    assert records[-1]["request_id"] == "b-59"
    assert not [name for name in os.listdir(tmp_path / "audit") if ".broken" in name]


def test_a_torn_line_of_another_process_is_cut_before_the_next_append(tmp_path: Path) -> None:
    async def scenario() -> None:
        one, other = make_log(tmp_path), make_log(tmp_path)
        await one.open()
        await other.open()
        for index in range(3):
            await one.append(fields("a", index))  # type: ignore[misc]
        (_, newest), *_ = reversed(list_segments(one.fs, one.directory))
        with open(newest, "ab") as file:
            file.write(b'{"action":"object:read","bucket":"b","by')  # a write cut short
        assert await other.append(fields("b", 0)) == 4  # type: ignore[misc]
        with open(newest, "ab") as file:
            file.write(b"not a record\n" + b'{"action":')  # whole lines too: kept aside
        assert await one.append(fields("a", 3)) == 6  # type: ignore[misc]
        await one.close()
        await other.close()

    run(scenario())
    records = chain(tmp_path)
    assert [r["action"] for r in records][4] == TAIL_CUT
    assert [r["request_id"] for r in records] == ["a-0", "a-1", "a-2", "b-0", "-", "a-3"]
    broken = [name for name in os.listdir(tmp_path / "audit") if name.endswith(".broken")]
    assert len(broken) == 1
    assert (tmp_path / "audit" / broken[0]).read_bytes().startswith(b"not a record\n")


def test_a_failed_fsync_in_one_process_stops_the_others_until_a_start() -> None:
    """A failed fsync may have dropped lines: no process may append after them (a record
    made durable behind a hole), until the failed process is restarted."""
    fs = SimFileSystem()

    def sim_log() -> AuditLog:
        return AuditLog(fs, "/data", secret=SECRET, strict=True, retention_seconds=86400.0)

    async def scenario() -> None:
        one, other = sim_log(), sim_log()
        await one.open()
        await other.open()
        assert await other.append(fields("b", 0)) == 1  # type: ignore[misc]
        fs.inject(Fault(fs.operations, "eio", operations=frozenset({"fsync"})))
        waiting = one.append(fields("a", 0))
        assert waiting is not None
        with pytest.raises(AuditUnavailableError):
            await waiting
        assert await other.stopped() and not other.failed  # /health says so at once
        refused = other.append(fields("b", 1))
        assert refused is not None
        with pytest.raises(AuditUnavailableError):
            await refused
        assert one.failed and other.failed
        await one.close()  # the failed process ends (its hold on the stop with it)
        await other.close()
        again = sim_log()  # a start: the lines of the failed fsync are still cached here
        await again.open()
        assert await again.append(fields("c", 0)) == 3  # type: ignore[misc]
        records, _ = await again.page(0, 10, None, None)
        assert [r["request_id"] for r in records] == ["b-0", "a-0", "c-0"]
        assert (await again.verify()).ok
        await again.close()

    run(scenario())


def test_logs_of_one_dir_in_one_process_take_turns_too(tmp_path: Path) -> None:
    """Two handles of one process exclude each other like two processes (an ``flock`` is
    per open file), so the crash matrix can run two "processes" in one."""

    async def scenario() -> None:
        logs = [make_log(tmp_path, segment_bytes=1024) for _ in range(2)]
        for log in logs:
            await log.open()

        async def appends(log: AuditLog, name: str) -> None:
            for index in range(0, 30, 2):
                waits = [log.append(fields(name, index)), log.append(fields(name, index + 1))]
                for wait in waits:
                    assert wait is not None
                    await wait

        await asyncio.gather(appends(logs[0], "a"), appends(logs[1], "b"))
        assert (await logs[0].verify()).records == 60
        for log in logs:
            await log.close()

    run(scenario())
    check_chain(chain(tmp_path))
