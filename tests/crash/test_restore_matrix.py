"""Restore under power loss, in-process: every file operation and crash point of a restore
cut, then every image of the disk checked (``tests.crash.restorekit``): nothing declared
ready (and a clear refusal, then a clean rerun) or a complete data dir at record N."""

from __future__ import annotations

import asyncio

import pytest

from tests.crash.restorekit import KINDS, run_kind

POINTS = {"restore.marked", "restore.written", "restore.synced"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_no_crash_of_a_restore_declares_a_partial_data_dir_ready(name: str) -> None:
    operations, hits, problems = asyncio.run(run_kind(KINDS[name]))
    print(f"{name}: {operations} file operations")
    assert problems == [], "\n".join(problems[:30])
    assert set(hits) >= POINTS, f"{name} never passed {sorted(POINTS - set(hits))}"
    assert operations > 20
