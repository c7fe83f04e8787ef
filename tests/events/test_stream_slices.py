"""The stream's loop in-process (``service.events.stream``, ``service.events.turns``): turns
are handed out first come, first served and never more than ``concurrency`` at once; a
backlog goes out in slices, so a coroutine scheduled while twenty streams replay runs after
a handful of slices, not after the backlogs; the authority is asked before every slice, and
an ``end`` frame is the last one. Order is asserted, never time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from service.events.feed import SLICE_EVENTS, EventFeed
from service.events.scope import BucketScope
from service.events.stream import EventStream, StreamEnd
from service.events.turns import DEFAULT_CONCURRENCY, ReplayTurns
from service.meta import MetaState
from tests.meta.factory import Factory, applied

BACKLOG = 3_000
STREAMS = 20


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(2)
    yield pool
    pool.shutdown()


def backlog(directory: Path, count: int, recent: int = 10_000) -> tuple[EventFeed, BucketScope]:
    """A feed holding ``count`` events of bucket ``b`` (and one of another bucket between
    every two), written to its files."""
    feed = EventFeed(
        RealFileSystem(),
        str(directory),
        segment_events=500,
        retention_seconds=1e9,
        retention_count=10**9,
        recent=recent,
    )
    feed.open(0)
    f, state = Factory(), MetaState()
    sequence = 0
    for event in (f.bucket("b"), f.bucket("other")):
        sequence += 1
        feed.observe(sequence, event, applied(state, event), state.bucket_id_of)
    for number in range(count):
        for event in (f.put(f"k{number}"), f.put(f"o{number}", bucket="other")):
            sequence += 1
            feed.observe(sequence, event, applied(state, event), state.bucket_id_of)
    feed.write_pending()
    bucket = state.get_bucket("b")
    assert bucket is not None
    return feed, BucketScope.of(bucket)


def stream_of(
    feed: EventFeed,
    executor: ThreadPoolExecutor,
    scope: BucketScope,
    authority: object = None,
    after: int = 0,
) -> EventStream:
    async def wait_or_stop(waiting: Awaitable[None]) -> None:
        await waiting

    return EventStream(
        feed,
        executor,
        scope,
        after,
        authority=authority if callable(authority) else (lambda: None),  # type: ignore[arg-type]
        stopping=lambda: False,
        wait_or_stop=wait_or_stop,
        expired=lambda after: b"event: error\n\n",
    )


def keys(frame: bytes) -> list[str]:
    return [json.loads(line[6:])["key"] for line in frame.split(b"\n") if line.startswith(b"data:")]


def test_turns_go_round_in_request_order_and_never_more_than_the_limit() -> None:
    async def scenario() -> list[int]:
        turns = ReplayTurns(concurrency=2)
        order: list[int] = []
        held = 0

        async def worker(number: int) -> None:
            nonlocal held
            for _ in range(3):
                async with turns.turn():
                    held += 1
                    assert held <= 2
                    order.append(number)
                    await asyncio.sleep(0)
                    held -= 1

        await asyncio.gather(*(worker(n) for n in range(5)))
        assert turns.granted == 15 and turns.waiting == 0
        return order

    order = asyncio.run(scenario())
    assert sorted(order) == sorted(list(range(5)) * 3)
    rounds = [order[i : i + 5] for i in range(0, 15, 5)]
    assert all(sorted(r) == list(range(5)) for r in rounds), order  # nobody goes twice first


@pytest.mark.parametrize("recent", [10_000, 50], ids=["from-memory", "from-files"])
def test_a_coroutine_scheduled_while_streams_replay_runs_after_a_few_slices(
    tmp_path: Path, executor: ThreadPoolExecutor, recent: int
) -> None:
    feed, scope = backlog(tmp_path / "events", BACKLOG, recent)

    async def scenario() -> list[tuple[str, int, int]]:
        log: list[tuple[str, int, int]] = []

        async def consume(number: int) -> None:
            seen = 0
            async for frame in stream_of(feed, executor, scope).frames():
                got = keys(frame)
                assert got == [f"k{n}" for n in range(seen, seen + len(got))]
                seen += len(got)
                log.append(("slice", number, len(got)))
                if seen == BACKLOG:
                    return

        async def probe() -> None:
            log.append(("probe", 0, 0))

        tasks = [asyncio.create_task(consume(n)) for n in range(STREAMS)]
        await asyncio.sleep(0)  # every stream has started its first read
        await asyncio.gather(probe(), *tasks)
        return log

    log = asyncio.run(scenario())
    slices = [entry for entry in log if entry[0] == "slice"]
    assert all(0 < count <= SLICE_EVENTS for _, _, count in slices)
    assert len(slices) >= STREAMS * BACKLOG // SLICE_EVENTS
    before_probe = log.index(("probe", 0, 0))
    assert before_probe <= DEFAULT_CONCURRENCY, log[: before_probe + 1]
    finished = {}
    for position, (_, number, _) in enumerate(slices):
        finished[number] = position
    assert min(finished.values()) > len(slices) // 2, "a stream replayed ahead of the others"


def test_the_authority_is_asked_before_every_slice_and_the_end_is_the_last_frame(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    feed, scope = backlog(tmp_path / "events", 1_000)
    asked = 0

    def authority() -> StreamEnd | None:
        nonlocal asked
        asked += 1
        return StreamEnd("access_key_revoked", "revoked") if asked > 2 else None

    async def scenario() -> list[bytes]:
        stream = stream_of(feed, executor, scope, authority, after=2)  # the buckets' records
        return [frame async for frame in stream.frames()]

    frames = asyncio.run(scenario())
    assert len(frames) == 3 and asked == 3
    assert [len(keys(frame)) for frame in frames[:2]] == [SLICE_EVENTS, SLICE_EVENTS]
    assert frames[-1].startswith(b"event: end\ndata: ")
    assert json.loads(frames[-1].split(b"data: ")[1]) == {
        "reason": "access_key_revoked",
        "message": "revoked",
    }


def test_an_unknown_end_reason_is_a_bug() -> None:
    with pytest.raises(ValueError):
        StreamEnd("because", "no")
