"""The follower's hand-over between receiving and applying (``follower._Pending``): answers
that come while a batch is applied join into the next batch, in order, whole; a receiver's
failure reaches the applier only after what came before it; the receiver waits while too
much is pending."""

from __future__ import annotations

import asyncio

import pytest

from journal.tail import RawRecord
from service.archive.refs import PayloadRef
from service.replication import follower
from service.replication.follower import _Batch, _Pending


def batch(first: int, last: int, inline: bytes = b"") -> _Batch:
    records = [RawRecord(sequence, b"frame-%d" % sequence) for sequence in range(first, last + 1)]
    refs = [PayloadRef(f"p{sequence}", 1, "0" * 64) for sequence in range(first, last + 1)]
    return _Batch(records, refs, {f"p{first}": inline} if inline else {})


def test_answers_received_meanwhile_become_one_batch_in_order() -> None:
    async def scenario() -> None:
        pending = _Pending()
        pending.add(batch(1, 3))
        pending.add(batch(4, 4, b"x"))
        pending.add(batch(5, 9))
        got = await pending.take()
        assert [record.sequence for record in got] == list(range(1, 10))
        assert [ref.payload_id for ref in got.refs] == [f"p{n}" for n in range(1, 10)]
        assert got.inline == {"p4": b"x"}
        taking = asyncio.ensure_future(pending.take())
        await asyncio.sleep(0.01)
        assert not taking.done()  # nothing pending: the applier waits
        pending.add(batch(10, 10))
        assert [record.sequence for record in await taking] == [10]

    asyncio.run(scenario())


def test_a_failure_comes_after_what_was_received_before_it() -> None:
    async def scenario() -> None:
        pending = _Pending()
        pending.add(batch(1, 2))
        pending.fail(RuntimeError("cut"))
        assert [record.sequence for record in await pending.take()] == [1, 2]
        with pytest.raises(RuntimeError, match="cut"):
            await pending.take()

    asyncio.run(scenario())


def test_the_receiver_waits_while_too_much_is_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follower, "MAX_PENDING_BYTES", 100)

    async def scenario() -> None:
        pending = _Pending()
        pending.add(batch(1, 1, b"y" * 200))
        room = asyncio.ensure_future(pending.room())
        await asyncio.sleep(0.01)
        assert not room.done()
        await pending.take()
        await asyncio.wait_for(room, 1)

    asyncio.run(scenario())
