"""The audit log in process: the chain, group commit, segments, torn tails, retention and
its signed anchor, fail-stop; and the trail's pure parts (actions, paths, names)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from fsseam.fs import RealFileSystem
from service.audit.actions import ACTIONS, action_of
from service.audit.log import AuditLog, AuditUnavailableError
from service.audit.record import GENESIS, ChainChecker, parse_line, seal
from service.audit.segments import list_segments, read_anchor
from service.audit.trail import audit_path, token_fingerprint
from service.openapi import openapi_document
from service.openapi.operations import PUBLIC

T = TypeVar("T")
SECRET = b"s" * 32


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def fields(index: int, time: str = "2026-11-27T10:00:00.000Z") -> dict[str, Any]:
    return {
        "time": time,
        "request_id": f"r{index}",
        "principal": {"user_id": "u_1", "access_key_id": "bk_1"},
        "source": "127.0.0.1",
        "method": "PUT",
        "path": f"/api/v1/buckets/b/objects/k{index}",
        "bucket": "b",
        "key": f"k{index}",
        "version_id": None,
        "action": "object:write",
        "status": 200,
        "bytes": index,
    }


def make_log(root: Path, *, strict: bool = True, **options: Any) -> AuditLog:
    return AuditLog(
        RealFileSystem(),
        str(root),
        secret=SECRET,
        strict=strict,
        retention_seconds=options.pop("retention_seconds", 86400.0),
        **options,
    )


async def append_all(log: AuditLog, items: list[dict[str, Any]]) -> list[int]:
    waits = [log.append(item) for item in items]
    return [await wait for wait in waits if wait is not None]


def lines(root: Path) -> list[bytes]:
    out: list[bytes] = []
    for _, path in list_segments(RealFileSystem(), str(root / "audit")):
        out += Path(path).read_bytes().splitlines()
    return out


# -- the chain ---------------------------------------------------------------------------------


def test_a_chain_checks_out_and_every_edit_breaks_it() -> None:
    records, prev = [], GENESIS
    for index in range(1, 6):
        hash_hex, line = seal(fields(index), index, prev)
        record = parse_line(line)
        assert record is not None and record["hash"] == hash_hex
        assert {**fields(index), "sequence": index, "prev": prev, "hash": hash_hex} == record
        records.append(record)
        prev = hash_hex
    assert ChainChecker(1, GENESIS).feed_all(records).ok
    edited = [dict(r) for r in records]
    edited[2]["status"] = 201
    assert ChainChecker(1, GENESIS).feed_all(edited).first_bad_sequence == 3
    removed = records[:1] + records[2:]
    assert ChainChecker(1, GENESIS).feed_all(removed).first_bad_sequence == 2
    swapped = [records[0], records[2], records[1], *records[3:]]
    assert ChainChecker(1, GENESIS).feed_all(swapped).first_bad_sequence == 2
    assert ChainChecker(1, GENESIS).feed_all([records[0], None]).first_bad_sequence == 2


# -- appending -------------------------------------------------------------------------------


def test_appends_share_writes_and_a_restart_continues_the_chain(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path)
        await log.open()
        sequences = await append_all(log, [fields(i) for i in range(1, 11)])
        assert sequences[0] == 1 and len(sequences) == 10
        await log.close()
        again = make_log(tmp_path)
        await again.open()
        assert again.last_sequence == 10
        await append_all(again, [fields(11)])
        result = await again.verify()
        assert (result.ok, result.records, result.last_sequence) == (True, 11, 11)
        await again.close()

    run(scenario())
    assert len(lines(tmp_path)) == 11


def test_a_torn_last_line_is_cut_and_the_chain_goes_on(tmp_path: Path) -> None:
    async def write(count: int) -> None:
        log = make_log(tmp_path)
        await log.open()
        await append_all(log, [fields(i) for i in range(count)])
        await log.close()

    run(write(3))
    ((_, path),) = list_segments(RealFileSystem(), str(tmp_path / "audit"))
    whole = Path(path).read_bytes()
    Path(path).write_bytes(whole + b'{"sequence": 4, "time": "2026-')  # a crash mid-write

    async def after() -> None:
        log = make_log(tmp_path)
        await log.open()
        assert log.last_sequence == 3
        await append_all(log, [fields(4)])
        assert (await log.verify()).ok
        await log.close()

    run(after())
    assert Path(path).read_bytes().startswith(whole) and len(lines(tmp_path)) == 4


def test_segments_roll_and_pages_read_across_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path, segment_bytes=1024)
        await log.open()
        for index in range(1, 41):
            await append_all(log, [fields(index)])
        assert len(list_segments(log.fs, log.directory)) > 5
        records, after = await log.page(10, 5, None, None)
        assert [r["sequence"] for r in records] == [11, 12, 13, 14, 15] and after == 15
        records, after = await log.page(35, 100, None, None)
        assert [r["sequence"] for r in records] == [36, 37, 38, 39, 40] and after is None
        filtered, _ = await log.page(0, 100, "b", "u_nobody")
        assert filtered == []
        assert (await log.verify()).ok
        await log.close()

    run(scenario())


def test_a_failed_write_stops_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path)
        await log.open()
        assert log._writer is not None

        def broken(*args: Any, **kwargs: Any) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(log._writer, "write", broken)
        waiting = log.append(fields(1))
        assert waiting is not None
        with pytest.raises(AuditUnavailableError):
            await waiting
        with pytest.raises(AuditUnavailableError):
            log.append(fields(2))
        await log.close()

    run(scenario())


def test_balanced_appends_do_not_wait_but_reach_the_file(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path, strict=False)
        await log.open()
        assert log.append(fields(1)) is None
        await log.flush()
        await log.close()

    run(scenario())
    assert len(lines(tmp_path)) == 1


# -- retention ---------------------------------------------------------------------------------


def test_prune_drops_old_segments_behind_a_signed_anchor(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path, segment_bytes=1024, retention_seconds=3600.0)
        await log.open()
        for index in range(1, 21):
            await append_all(log, [fields(index, time="2020-01-01T00:00:00.000Z")])
        for index in range(21, 26):
            await append_all(log, [fields(index, time="2999-01-01T00:00:00.000Z")])
        before = len(list_segments(log.fs, log.directory))
        removed = await log.prune()
        assert removed >= 1 and len(list_segments(log.fs, log.directory)) == before - removed
        anchor, signed = read_anchor(log.fs, log.directory, SECRET)
        assert signed and anchor.sequence > 1
        result = await log.verify()
        assert result.ok and result.first_sequence == anchor.sequence
        assert result.last_sequence == 25
        records, _ = await log.page(0, 100, None, None)
        assert records[0]["sequence"] == anchor.sequence
        await log.close()
        _, other_secret = read_anchor(log.fs, log.directory, b"x" * 32)
        assert not other_secret

    run(scenario())
    document = json.loads((tmp_path / "audit" / "anchor.json").read_text())
    document["sequence"] += 1

    async def forged() -> None:
        (tmp_path / "audit" / "anchor.json").write_text(json.dumps(document))
        log = make_log(tmp_path, segment_bytes=1024, retention_seconds=3600.0)
        await log.open()
        assert not (await log.verify()).ok
        segments = len(list_segments(log.fs, log.directory))
        assert await log.prune() == 0, "a prune would sign over the forged anchor"
        assert len(list_segments(log.fs, log.directory)) == segments
        assert not (await log.verify()).ok
        await log.close()

    run(forged())


def test_no_prune_while_records_before_the_oldest_segment_are_missing(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path, segment_bytes=1024, retention_seconds=3600.0)
        await log.open()
        for index in range(1, 21):
            await append_all(log, [fields(index, time="2020-01-01T00:00:00.000Z")])
        await append_all(log, [fields(21, time="2999-01-01T00:00:00.000Z")])
        oldest = list_segments(log.fs, log.directory)[0][1]
        os.unlink(oldest)  # removed by hand, no anchor: the start is missing
        assert await log.prune() == 0
        assert not os.path.exists(tmp_path / "audit" / "anchor.json")
        result = await log.verify()
        assert not result.ok and result.first_bad_sequence == 1
        await log.close()

    run(scenario())


def test_a_removed_line_is_left_for_verify_not_cut_as_a_crash(tmp_path: Path) -> None:
    async def write() -> None:
        log = make_log(tmp_path)
        await log.open()
        await append_all(log, [fields(i) for i in range(1, 6)])
        await log.close()

    run(write())
    ((_, path),) = list_segments(RealFileSystem(), str(tmp_path / "audit"))
    kept = Path(path).read_bytes().splitlines(keepends=True)
    del kept[2]  # record 3: whole lines shift, which no crash does
    Path(path).write_bytes(b"".join(kept))

    async def after() -> None:
        log = make_log(tmp_path)
        await log.open()
        assert log.last_sequence == 5
        result = await log.verify()
        assert not result.ok and result.first_bad_sequence == 3
        await log.close()

    run(after())
    assert not os.path.exists(path + ".broken") and len(lines(tmp_path)) == 4


def test_the_newest_segment_is_never_pruned(tmp_path: Path) -> None:
    async def scenario() -> None:
        log = make_log(tmp_path, retention_seconds=1.0)
        await log.open()
        await append_all(log, [fields(1, time="2020-01-01T00:00:00.000Z")])
        assert await log.prune() == 0
        assert (await log.verify()).records == 1
        await log.close()

    run(scenario())
    assert not os.path.exists(tmp_path / "audit" / "anchor.json")


# -- the trail's pure parts --------------------------------------------------------------------


def test_every_authenticated_operation_has_an_action() -> None:
    missing = []
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            public = operation.get("security") == PUBLIC
            if (
                public and operation["operationId"] not in ("login", "getShared", "headShared")
            ) or (path.startswith("/console") or path == "/health"):
                continue
            if (path, method.upper()) not in ACTIONS:
                missing.append((path, method))
    assert missing == []
    assert action_of("/nowhere", "GET") == "GET /nowhere"


def test_paths_and_tokens_are_never_recorded_as_sent() -> None:
    assert audit_path("/api/v1/videos/play/eyJhbGciOi.xyz/hls/a.m3u8") == (
        "/api/v1/videos/play/{token}/hls/a.m3u8"
    )
    assert audit_path("/api/v1/buckets/b/objects/k") == "/api/v1/buckets/b/objects/k"
    fingerprint = token_fingerprint("the.token")
    assert (
        fingerprint.startswith("tk_") and "the.token" not in fingerprint and len(fingerprint) == 19
    )
