"""The sweep after a start removes the orphans a crash left, never a PUT's payload between
its promote and its commit, even when the kernel's coarse clock stamped that payload's
mtime just before the start (``FileSystem.timestamp_slack``). A single process's start uses
no other grace: such a PUT, answered right after the start, once lost its body here."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from fsseam.fs import RealFileSystem
from service.config import Config
from service.engine.journaled import journaled_engine
from tests.storage.test_payload_gc import make_payload

START = 1_800_000_000.0
"""The engine's clock, stopped at one instant: the start's instant."""


def test_the_start_sweep_keeps_what_the_coarse_clock_stamped_just_before_the_start(
    tmp_path: Path,
) -> None:
    config = Config(data_dir=str(tmp_path), durability="strict", gc_interval=1e9)
    engine, committer = journaled_engine(config, fs=RealFileSystem(), clock=lambda: START)
    store = engine.store
    os.makedirs(store.layout.staging_dir, exist_ok=True)
    in_flight, orphan = make_payload(store), make_payload(store)
    lag = RealFileSystem.timestamp_slack / 2  # within a coarse clock's lag
    for payload_id, mtime in ((in_flight, START - lag), (orphan, START - 60)):
        os.utime(store.layout.payload_path(payload_id), (mtime, mtime))

    async def start_and_sweep() -> None:
        await engine.start()
        assert committer.start_sweep is not None
        await committer.start_sweep
        await engine.stop()

    asyncio.run(start_and_sweep())
    assert os.path.exists(store.layout.payload_path(in_flight))
    assert not os.path.exists(store.layout.payload_path(orphan))
