"""Helpers of the archive tests: configurations, targets of each kind, and the archive
source a real engine offers (as the server wires it, ``service.engine``)."""

from __future__ import annotations

import os
from pathlib import Path

from journal.snapshot import list_snapshots
from service.archive.shipper import ArchiveSource
from service.archive.targets import ArchiveTarget, DirectoryTarget, RcloneTarget
from service.config import Config
from service.engine.core import Engine
from service.engine.journaled import JournalCommitter


def config(data_dir: Path, **overrides: object) -> Config:
    values: dict[str, object] = {
        "data_dir": str(data_dir),
        "durability": "strict",
        "gc_interval": 1e9,
        "snapshot_interval": 1e9,
        "snapshot_every": 10**9,
    }
    values.update(overrides)
    return Config(**values)  # type: ignore[arg-type]


def target_for(kind: str, root: Path) -> ArchiveTarget:
    """A directory target, or rclone's local backend over the same directory (a remote named
    ``arch`` defined by environment only, as users may)."""
    if kind == "directory":
        return DirectoryTarget(str(root))
    os.environ["RCLONE_CONFIG_ARCH_TYPE"] = "local"
    return RcloneTarget(f"arch:{root}")


def committer_of(engine: Engine) -> JournalCommitter:
    """The engine's journal committer (the engines here write their own journal)."""
    committer = engine.committer
    assert isinstance(committer, JournalCommitter)
    return committer


def archive_source(engine: Engine) -> ArchiveSource:
    journal_dir = os.path.join(engine.config.data_dir, "journal")
    committer = committer_of(engine)

    async def snapshot_now() -> int:
        await committer.snapshot()
        found = list_snapshots(engine.fs, journal_dir)
        return found[0][0] if found else 0  # newest first

    async def durable() -> int:
        assert committer.journal is not None
        return committer.journal.stats().last_sequence

    return ArchiveSource(
        fs=engine.fs,
        data_dir=engine.config.data_dir,
        journal_dir=journal_dir,
        max_record_bytes=16 * 1024 * 1024,
        durable=durable,
        snapshot_now=snapshot_now,
        server_id=lambda: engine.state.server_id,
        secret_path=os.path.join(engine.config.data_dir, "server-secret"),
        direct_file=engine.store.direct_file,
    )
