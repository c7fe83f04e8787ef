"""What the index keeps beside the versions: usage and payload references, and the
balanced-mode checkpoint that bounds the verification after an unclean start.

An in-process engine on the real disk commits events directly (their payload ids name no
file); a start resumes from the index, and its usage and references must equal those of a
state replayed from the journal alone, without being recounted.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from journal import Journal, JournalOptions
from service.config import Config
from service.engine.core import Engine
from service.engine.journaled import JournalCommitter, journaled_engine
from service.index.opening import INDEX_DIRNAME
from service.meta import MetaState, decode_snapshot
from service.meta.model import Usage
from service.storage.layout import new_payload_id
from tests.meta.factory import Factory

REPO = Path(__file__).resolve().parents[2]


def config(data_dir: Path, durability: str = "strict") -> Config:
    return Config(
        data_dir=str(data_dir),
        durability=durability,  # type: ignore[arg-type]
        gc_interval=1e9,
        snapshot_interval=1e9,
        snapshot_every=10**9,
    )


def truth(data_dir: Path) -> MetaState:
    journal = Journal.open(str(data_dir / "journal"), JournalOptions(durability="balanced"))
    state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
    for record in journal.replay():
        state.apply(record.event)
    journal.close_unused()
    return state


def counters(state: MetaState) -> tuple[dict[str, Usage], set[str]]:
    usages = {b.name: state.bucket_usage(b.name) for b in state.list_buckets()}
    return usages, state.referenced_payloads()


async def commit_all(engine: Engine, events: list[dict[str, Any]]) -> None:
    for event in events:
        await engine.commit(event)


async def abandon(engine: Engine, journal: JournalCommitter) -> None:
    """Leave the engine as a SIGKILL would: no final snapshot, no clean marks."""
    for task in engine._background:
        task.cancel()
    await asyncio.gather(*engine._background, return_exceptions=True)
    assert journal.journal is not None and journal.index is not None
    await journal.journal.close()  # what was written stays, as the page cache keeps it
    journal.index.close()
    engine.events.close()
    engine.executor.shutdown(wait=True)


def test_usage_and_references_resume_from_the_index_as_the_journal_says(tmp_path: Path) -> None:
    f = Factory()
    history = [f.bucket("b"), f.bucket("c", versioning=True)]
    history += [f.put(f"k{i}", size=10 + i) for i in range(6)]
    history += [f.put("k1", size=99), f.delete("k2")]
    history += [f.put("v", size=5, bucket="c"), f.put("v", size=7, bucket="c")]
    history += [f.start("big"), f.delete("v", bucket="c")]

    async def main() -> None:
        engine, journal = journaled_engine(config(tmp_path))
        await engine.start()
        await commit_all(engine, history[:6])
        await journal.snapshot()
        await commit_all(engine, history[6:])
        await abandon(engine, journal)  # the index holds everything; the snapshot only the start
        again, _ = journaled_engine(config(tmp_path))
        await again.start()
        assert counters(again.state) == counters(truth(tmp_path))
        assert again.state.bucket_usage("b") == Usage(5, 10 + 99 + 13 + 14 + 15)
        assert again.state.bucket_usage("c") == Usage(2, 12)
        await again.stop()

    asyncio.run(main())


READER = """
import json, sys
from service.index.lmdb_index import LmdbObjectIndex
index = LmdbObjectIndex(sys.argv[1], readonly=True)
page = index.list_objects("b", "", None, 10, None)
print(json.dumps({
    "usage": [index.usage("b").object_count, index.usage("b").size_bytes],
    "buckets": sorted(index.usages()),
    "keys": [version.key for version in page.objects],
    "applied": index.applied()[0],
    "rest": index.rest() is not None,
}))
index.close()
"""


def test_another_process_reads_usage_and_state_from_the_open_index(tmp_path: Path) -> None:
    f = Factory()

    async def main() -> None:
        engine, journal = journaled_engine(config(tmp_path))
        await engine.start()
        await commit_all(engine, [f.bucket("b"), f.put("x", size=3), f.put("y", size=4)])
        reader = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", READER, str(tmp_path / INDEX_DIRNAME)],
            capture_output=True,
            check=True,
            cwd=REPO,
        )
        assert journal.journal is not None
        assert json.loads(reader.stdout) == {
            "usage": [2, 7],
            "buckets": ["b"],
            "keys": ["x", "y"],
            "applied": journal.journal.stats().last_sequence,
            "rest": True,
        }
        await engine.stop()

    asyncio.run(main())


def test_after_an_unclean_stop_only_payloads_after_the_checkpoint_are_verified(
    tmp_path: Path,
) -> None:
    f = Factory()
    before = [f.bucket("b"), *[f.put(f"old{i}") for i in range(3)]]
    after = [f.put(f"new{i}") for i in range(2)]
    for event in before[1:] + after:
        event["payload_id"] = new_payload_id()  # a real id, naming no file

    async def main() -> None:
        engine, journal = journaled_engine(config(tmp_path, "balanced"))
        await engine.start()
        await commit_all(engine, before)
        await journal.checkpoint()  # fsyncs what those records name (nothing: no files here)
        await commit_all(engine, after)
        await abandon(engine, journal)
        again, _ = journaled_engine(config(tmp_path, "balanced"))
        await again.start()
        # The payloads of the records after the checkpoint are verified: their files are
        # missing, so they are quarantined; those before it are not looked at.
        assert again.quarantined == {event["payload_id"] for event in after}
        await again.stop()

    asyncio.run(main())
