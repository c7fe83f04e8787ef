"""Ship, verify, restore: a real engine on the real disk ships to an archive (a directory,
and rclone's local backend), and a restore to any archived point gives exactly the state
the journal had then, every payload byte-identical.

The engine here is driven in-process through the same operations the HTTP handlers call;
the server-level tests (``test_archive_server.py``) run the real process.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from service.archive import layout
from service.archive.restore import restore
from service.archive.shipper import Archiver, read_state
from service.archive.targets import ArchiveError, ArchiveTarget
from service.archive.verify import verify
from service.auth import load_or_create_server_secret
from service.engine.core import Engine
from service.engine.journaled import journaled_engine
from service.meta import encode_snapshot
from service.ops import buckets, objects
from service.ops.objects import PutIntent
from service.startup import RESTORE_INCOMPLETE
from tests.archive.kit import archive_source, committer_of, config, target_for
from tests.serverproc import free_port
from tests.test_first_run import assert_one_line_refusal, run_service

BOTH_KINDS = pytest.mark.parametrize("kind", ["directory", "rclone"])
RCLONE_IN_TEST_SLOW = pytest.mark.parametrize(
    "kind", ["directory", pytest.param("rclone", marks=pytest.mark.slow)]
)
"""The longest tests run through rclone in ``make test-slow`` only (the same code, rclone's
process per call making them several times slower); the others run both kinds always."""


async def put(engine: Engine, key: str, body: bytes) -> None:
    intent = PutIntent(bucket="bkt", key=key, content_length=len(body))
    objects.precheck_put(engine, intent)
    await objects.store_small_object(engine, intent, body)


async def started(data_dir: Path) -> Engine:
    """An engine as the server starts it (the signing secret made beside it)."""
    engine, _ = journaled_engine(config(data_dir))
    await engine.start()
    await engine.run_blocking(load_or_create_server_secret, engine.fs, str(data_dir))
    return engine


async def state_of(data_dir: Path) -> tuple[bytes, dict[str, bytes]]:
    """A restored data dir, started: its state's bytes and every current object's body."""
    engine = await started(data_dir)
    try:
        bodies: dict[str, bytes] = {}
        for bucket in engine.state.list_buckets():
            for version in engine.state.list_objects(bucket.name, "", None, 1000).objects:
                assert version.payload_id is not None
                bodies[version.key] = objects.read_window(
                    engine.store, version.payload_id, 0, version.size
                )
        return encode_snapshot(engine.state), bodies
    finally:
        await engine.stop()


@RCLONE_IN_TEST_SLOW
def test_a_restore_to_each_point_equals_the_journal_at_that_point(
    tmp_path: Path, kind: str
) -> None:
    primary = tmp_path / "primary"
    target = target_for(kind, tmp_path / "archive")
    points: dict[int, dict[str, bytes]] = {}
    states: dict[int, bytes] = {}

    async def main() -> None:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt", "versioning_enabled": True})
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        live: dict[str, bytes] = {}
        for round_ in range(3):
            for n in range(5):
                body = os.urandom(100 + n) + bytes([round_])
                await put(engine, f"k{n}", body)
                live[f"k{n}"] = body
            await objects.delete_object(engine, "bkt", "k0", None)
            live.pop("k0")
            points[committer_of(engine).last_sequence()] = dict(live)
            states[committer_of(engine).last_sequence()] = encode_snapshot(engine.state)
            if round_ == 1:
                await committer_of(engine).snapshot()
            await archiver.ship_once()
        await archiver.stop()
        await engine.stop()

    asyncio.run(main())
    report = verify(target)
    assert report.ok, report.problem
    for sequence, live in points.items():
        restored = tmp_path / f"restored-{sequence}"
        result = restore(target, str(restored), to_sequence=sequence)
        assert result.sequence == sequence
        state, bodies = asyncio.run(state_of(restored))
        assert state == states[sequence]
        assert bodies == live


@BOTH_KINDS
def test_a_restore_to_a_time_takes_the_last_record_at_or_before_it(
    tmp_path: Path, kind: str
) -> None:
    primary = tmp_path / "primary"
    target = target_for(kind, tmp_path / "archive")
    marks: list[tuple[int, int, bytes]] = []

    async def main() -> None:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        for n in range(4):
            await put(engine, f"t{n}", b"x" * (n + 1))
            marks.append(
                (committer_of(engine).last_sequence(), _now_ms(), encode_snapshot(engine.state))
            )
            await asyncio.sleep(0.02)
        await archiver.ship_once()
        await archiver.stop()
        await engine.stop()

    asyncio.run(main())
    sequence, moment, state = marks[1]
    result = restore(target, str(tmp_path / "at-time"), to_time_ms=moment)
    assert result.sequence == sequence
    assert asyncio.run(state_of(tmp_path / "at-time"))[0] == state


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


@BOTH_KINDS
def test_restore_refuses_a_non_empty_dir_and_a_point_outside_the_archive(
    tmp_path: Path, kind: str
) -> None:
    primary = tmp_path / "primary"
    target = target_for(kind, tmp_path / "archive")

    async def main() -> int:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
        await put(engine, "a", b"a")
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        await archiver.ship_once()
        end = archiver.archived_sequence
        await archiver.stop()
        await engine.stop()
        return end

    end = asyncio.run(main())
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "something").write_text("x")
    with pytest.raises(ArchiveError, match="not empty"):
        restore(target, str(busy))
    with pytest.raises(ArchiveError, match="outside what the archive holds"):
        restore(target, str(tmp_path / "later"), to_sequence=end + 5)


@RCLONE_IN_TEST_SLOW
def test_verify_names_a_missing_records_file_a_damaged_record_and_a_missing_payload(
    tmp_path: Path, kind: str
) -> None:
    primary = tmp_path / "primary"
    archive_dir = tmp_path / "archive"
    target = target_for(kind, archive_dir)

    async def main() -> None:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        for n in range(3):
            await put(engine, f"v{n}", os.urandom(50))
            await archiver.ship_once()
        await archiver.stop()
        await engine.stop()

    asyncio.run(main())
    assert verify(target).ok
    state = read_state(target)
    middle = state.records[len(state.records) // 2]
    saved = (archive_dir / middle.name).read_bytes()

    (archive_dir / middle.name).unlink()
    report = verify(target)
    assert not report.ok and "missing records" in (report.problem or "")
    assert f"expected record {middle.first}" in (report.problem or "")

    damaged = bytearray(saved)
    damaged[-1] ^= 0x01
    (archive_dir / middle.name).write_bytes(bytes(damaged))
    report = verify(target)
    assert not report.ok and "damaged record" in (report.problem or "")
    (archive_dir / middle.name).write_bytes(saved)
    assert verify(target).ok

    payload = next((archive_dir / layout.PAYLOADS).rglob("*"))
    while payload.is_dir():
        payload = next(payload.iterdir())
    payload.unlink()
    report = verify(target)
    assert not report.ok and f"payload {payload.name} is missing" == report.problem


@BOTH_KINDS
def test_a_flipped_payload_byte_is_found_by_verify_and_refused_by_restore(
    tmp_path: Path, kind: str
) -> None:
    primary = tmp_path / "primary"
    archive_dir = tmp_path / "archive"
    target: ArchiveTarget = target_for(kind, archive_dir)

    async def main() -> None:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
        await put(engine, "only", b"payload bytes")
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        await archiver.ship_once()
        await archiver.stop()
        await engine.stop()

    asyncio.run(main())
    payload = next(p for p in (archive_dir / layout.PAYLOADS).rglob("*") if p.is_file())
    payload.write_bytes(b"payload bytez")
    assert hashlib.sha256(payload.read_bytes()).hexdigest() != payload.name
    report = verify(target)
    assert not report.ok and "fails its SHA-256" in (report.problem or "")
    restored = tmp_path / "restored"
    with pytest.raises(ArchiveError, match="fails its SHA-256"):
        restore(target, str(restored))
    # A restore that failed leaves its marker: never taken for a data dir that is ready.
    assert (restored / RESTORE_INCOMPLETE).exists()
    with pytest.raises(ArchiveError, match=r"did not finish.*delete the directory"):
        restore(target, str(restored))
    done = run_service("--data-dir", str(restored), "--port", str(free_port()))
    assert done.returncode == 1
    assert_one_line_refusal(done, str(restored), RESTORE_INCOMPLETE, "delete the directory")


def test_a_new_archive_starts_at_the_snapshot_it_just_wrote(tmp_path: Path) -> None:
    """Not at an older one the journal still keeps beside it (``list_snapshots`` is newest
    first; the base was once taken from the wrong end)."""
    primary = tmp_path / "primary"
    target = target_for("directory", tmp_path / "archive")

    async def main() -> int:
        engine = await started(primary)
        await buckets.create_bucket(engine, "u_test", {"name": "bkt"})
        await put(engine, "first", b"one")
        await committer_of(engine).snapshot()  # an older snapshot, kept beside the next
        await put(engine, "second", b"two")
        archiver = Archiver(target, archive_source(engine), engine.run_blocking, 7.0)
        await archiver.begin()
        await archiver.ship_once()
        await archiver.stop()
        last = committer_of(engine).last_sequence()
        await engine.stop()
        return last

    last = asyncio.run(main())
    shipped = [snapshot.sequence for snapshot in read_state(target).snapshots]
    assert shipped and shipped[0] == last, shipped
