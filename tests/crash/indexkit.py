"""The object index in the crash matrix: what a crash left of the simulated index (lost,
torn, stale, current or ahead of the journal), and the check that a restart, whatever it
found, starts from the state the journal alone describes (``tests/crash/simindex.py``)."""

from __future__ import annotations

import os
from collections import Counter

from fsseam.simfs import SimFileSystem
from journal import Journal, JournalOptions
from service.config import Config
from service.engine.core import Engine
from service.index.opening import INDEX_DIRNAME
from service.index.protocol import IndexUnreadableError
from service.meta import MetaState, decode_snapshot, encode_snapshot
from tests.crash.simindex import FILENAME as SIM_FILENAME
from tests.crash.simindex import SimIndex

INDEX_FATES: Counter[str] = Counter()
"""How the simulated index came back in the crash images checked: lost, torn, stale,
current or ahead (of the journal)."""


async def journal_truth(image: SimFileSystem, config: Config) -> tuple[MetaState, int]:
    """The state the journal on ``image`` alone describes, and its last sequence (read on a
    copy: opening cuts a torn tail)."""
    copy = image.crash_image("keep_unsynced")
    journal = Journal.open(config.journal_dir, JournalOptions(durability=config.durability), copy)
    try:
        state = decode_snapshot(journal.snapshot.data) if journal.snapshot else MetaState()
        for record in journal.replay():
            state.apply(record.event)
        return state, journal.stats().last_sequence
    finally:
        await journal.close()


def index_fate(image: SimFileSystem, config: Config, last: int) -> str:
    """What the crash left of the simulated index, against the journal's last sequence."""
    directory = os.path.join(config.data_dir, INDEX_DIRNAME)
    if not image.exists(os.path.join(directory, SIM_FILENAME)):
        return "lost"
    try:
        applied = SimIndex(image.crash_image("keep_unsynced"), directory).applied()[0]
    except IndexUnreadableError:
        return "torn"
    return "ahead" if applied > last else "stale" if applied < last else "current"


def index_problems(engine: Engine, truth: MetaState) -> list[str]:
    """Where the state the engine started with (from its index, resumed or rebuilt) is not
    the journal's: the records, usage and payload references."""
    problems = []
    if encode_snapshot(engine.state) != encode_snapshot(truth):
        problems.append("the state after the restart is not the replayed journal's")
    for bucket in truth.list_buckets():
        usage, expected = engine.state.bucket_usage(bucket.name), truth.bucket_usage(bucket.name)
        if usage != expected:
            problems.append(f"bucket {bucket.name}: usage {usage} is not the journal's {expected}")
    if engine.state.referenced_payloads() != truth.referenced_payloads():
        problems.append("the payload references are not the journal's")
    return problems
