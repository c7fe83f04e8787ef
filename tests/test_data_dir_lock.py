"""The seam's exclusive lock (``FileSystem.try_lock``), on the real and the simulated disk."""

from __future__ import annotations

import os
from pathlib import Path

from fsseam.fs import RealFileSystem
from fsseam.simfs import SimFileSystem


def test_a_held_lock_refuses_a_second_holder_until_released(tmp_path: Path) -> None:
    fs = RealFileSystem()
    path = str(tmp_path / "LOCK")
    first = fs.try_lock(path)
    assert first is not None
    assert fs.lock_holder(path) == str(os.getpid())
    assert fs.try_lock(path) is None  # another open file of the same path: refused
    first.release()
    first.release()  # twice is harmless
    again = fs.try_lock(path)
    assert again is not None
    again.release()


def test_the_simulated_disk_locks_the_same_way() -> None:
    fs = SimFileSystem()
    first = fs.try_lock("/d/LOCK")
    assert first is not None and fs.try_lock("/d/LOCK") is None
    first.release()
    assert fs.try_lock("/d/LOCK") is not None
