"""The persistent object index at start: resumed, caught up, or rebuilt, never wrong.

An in-process engine on the real disk (LMDB cannot run on the simulated one) commits events
directly; each case then damages or swaps what is on disk the way a crash or an operator
would, starts a fresh engine, and compares its state with a state replayed from the journal
alone (the truth).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, JournalOptions
from service.config import Config
from service.engine.journaled import journaled_engine
from service.index.opening import INDEX_DIRNAME, MARKER_FILENAME
from service.meta import MetaState, decode_snapshot, encode_snapshot
from tests.meta.factory import Factory


def config(data_dir: Path) -> Config:
    return Config(
        data_dir=str(data_dir),
        durability="strict",
        gc_interval=1e9,
        snapshot_interval=1e9,
        snapshot_every=10**9,
    )


def journal_truth(data_dir: Path) -> bytes:
    """The state the journal alone describes (snapshot + records), as snapshot bytes."""
    journal = Journal.open(str(data_dir / "journal"), JournalOptions(durability="strict"))
    state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
    for record in journal.replay():
        state.apply(record.event)
    return encode_snapshot(state)


async def run(data_dir: Path, events: list[dict[str, Any]], *, snapshot: bool = False) -> bytes:
    """Start an engine, commit ``events``, optionally snapshot, stop; its state's bytes."""
    engine, journal = journaled_engine(config(data_dir))
    await engine.start()
    for event in events:
        await engine.commit(event)
    if snapshot:
        await journal.snapshot()
    state = encode_snapshot(engine.state)
    await engine.stop()
    return state


async def started_state(data_dir: Path) -> bytes:
    engine, _ = journaled_engine(config(data_dir))
    await engine.start()
    state = encode_snapshot(engine.state)
    await engine.stop()
    return state


def puts(f: Factory, count: int, prefix: str) -> list[dict[str, Any]]:
    return [f.put(f"{prefix}/{i:03d}") for i in range(count)]


@pytest.fixture
def populated(tmp_path: Path) -> tuple[Path, Factory]:
    f = Factory()
    asyncio.run(run(tmp_path, [f.bucket("b"), *puts(f, 20, "a"), f.delete("a/003")]))
    return tmp_path, f


def test_a_clean_restart_resumes_from_the_index(
    populated: tuple[Path, Factory], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, _ = populated
    with caplog.at_level(logging.INFO, logger="service.engine"):
        state = asyncio.run(started_state(data_dir))
    assert state == journal_truth(data_dir)
    assert "rebuilding" not in caplog.text
    assert "replaying the journal after it" in caplog.text


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_a_deleted_or_damaged_index_is_rebuilt(
    populated: tuple[Path, Factory], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, _ = populated
    index = data_dir / INDEX_DIRNAME
    if damage == "deleted":
        shutil.rmtree(index)
    else:
        (index / "data.mdb").write_bytes(b"not an lmdb file" * 100)
    with caplog.at_level(logging.INFO, logger="service.engine"):
        assert asyncio.run(started_state(data_dir)) == journal_truth(data_dir)
    assert "rebuilding the index" in caplog.text


def test_an_index_ahead_of_the_journal_is_rebuilt_never_served(
    populated: tuple[Path, Factory], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, f = populated
    journal_copy = data_dir.parent / (data_dir.name + "-old-journal")
    shutil.copytree(data_dir / "journal", journal_copy)
    truth_before = journal_truth(data_dir)
    asyncio.run(run(data_dir, puts(f, 5, "later")))
    # The index reached the disk, the journal's tail did not.
    shutil.rmtree(data_dir / "journal")
    shutil.copytree(journal_copy, data_dir / "journal")
    with caplog.at_level(logging.INFO, logger="service.engine"):
        assert asyncio.run(started_state(data_dir)) == truth_before
    assert "ahead of the journal" in caplog.text


def test_an_index_left_open_by_a_machine_crash_is_rebuilt(
    populated: tuple[Path, Factory], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, _ = populated
    (data_dir / MARKER_FILENAME).write_text("another-boot")
    with caplog.at_level(logging.INFO, logger="service.engine"):
        assert asyncio.run(started_state(data_dir)) == journal_truth(data_dir)
    assert "the machine restarted" in caplog.text


def test_an_index_older_than_the_snapshot_is_rebuilt(populated: tuple[Path, Factory]) -> None:
    data_dir, f = populated
    stale = data_dir.parent / (data_dir.name + "-older-index")
    shutil.copytree(data_dir / INDEX_DIRNAME, stale)
    asyncio.run(run(data_dir, puts(f, 5, "d"), snapshot=True))
    asyncio.run(run(data_dir, puts(f, 5, "e"), snapshot=True))
    shutil.rmtree(data_dir / INDEX_DIRNAME)
    shutil.copytree(stale, data_dir / INDEX_DIRNAME)
    assert asyncio.run(started_state(data_dir)) == journal_truth(data_dir)


def test_an_index_built_from_another_journal_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    f = Factory()
    asyncio.run(run(one, [f.bucket("b"), *puts(f, 5, "one")]))
    asyncio.run(run(two, [f.bucket("b"), *puts(f, 5, "two")]))  # same sequences, other events
    shutil.rmtree(one / INDEX_DIRNAME)
    shutil.copytree(two / INDEX_DIRNAME, one / INDEX_DIRNAME)
    with caplog.at_level(logging.INFO, logger="service.engine"):
        assert asyncio.run(started_state(one)) == journal_truth(one)
    assert "not built from this journal" in caplog.text


def test_a_marker_left_half_written_by_a_crash_does_not_stop_the_start(
    populated: tuple[Path, Factory],
) -> None:
    """A start killed between creating ``index.open.tmp`` and renaming it (found by killing
    a restarting writer) must not make every later start fail on the leftover."""
    data_dir, _ = populated
    (data_dir / (MARKER_FILENAME + ".tmp")).write_bytes(b"torn")
    assert asyncio.run(started_state(data_dir)) == journal_truth(data_dir)
    assert not (data_dir / (MARKER_FILENAME + ".tmp")).exists()


def test_a_rebuild_that_finds_the_newest_snapshot_damaged_falls_back_to_the_older_one(
    populated: tuple[Path, Factory], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, f = populated
    asyncio.run(run(data_dir, puts(f, 3, "d"), snapshot=True))
    asyncio.run(run(data_dir, puts(f, 3, "e"), snapshot=True))
    truth = journal_truth(data_dir)
    newest = max((data_dir / "journal").glob("snapshot-*.snap"))
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF  # the header still checks out; the data does not
    newest.write_bytes(bytes(data))
    shutil.rmtree(data_dir / INDEX_DIRNAME)
    with caplog.at_level(logging.INFO, logger="service.engine"):
        assert asyncio.run(started_state(data_dir)) == truth
    assert "checking every snapshot" in caplog.text
