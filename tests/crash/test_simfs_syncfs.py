"""The simulated disk's ``syncfs``: every file and directory durable at once, or nothing.

The crash matrix relies on this model for strict small PUTs (``service.storage.groupsync``)
and balanced checkpoints; these tests pin the model itself.
"""

from __future__ import annotations

import errno

import pytest

from fsseam.simfs import Fault, SimFileSystem, SimulatedCrash


def written(fs: SimFileSystem) -> None:
    """A payload as a small PUT leaves it: written, closed and renamed, nothing synced."""
    fs.mkdir("/d/staging")
    fs.mkdir("/d/payloads/ab")
    file = fs.create("/d/staging/x.part")
    file.write(b"payload bytes")
    file.close()
    fs.rename("/d/staging/x.part", "/d/payloads/ab/x")


def survivors(fs: SimFileSystem) -> dict[str, bytes]:
    image = fs.crash_image("lose_unsynced")
    return {
        name: image.read_bytes(f"/d/payloads/ab/{name}")
        for name in (image.listdir("/d/payloads/ab") if image.exists("/d/payloads/ab") else [])
    }


def test_before_the_sync_a_power_loss_keeps_nothing_after_it_everything() -> None:
    fs = SimFileSystem()
    handle = fs.open_syncfs("/")
    written(fs)
    assert survivors(fs) == {}
    handle.sync()
    assert survivors(fs) == {"x": b"payload bytes"}
    assert fs.counts["syncfs"] == 1
    assert fs.unsynced() == 0


def test_a_failed_sync_makes_nothing_durable_and_a_performed_failure_everything() -> None:
    fs = SimFileSystem()
    handle = fs.open_syncfs("/")
    written(fs)
    fs.fail_at(fs.operations, errno.EIO, operations=["syncfs"])
    with pytest.raises(OSError) as raised:
        handle.sync()
    assert raised.value.errno == errno.EIO
    assert survivors(fs) == {}
    fs.inject(Fault(fs.operations, "eio", operations=frozenset({"syncfs"}), performed=True))
    with pytest.raises(OSError):
        handle.sync()
    assert survivors(fs) == {"x": b"payload bytes"}


def test_a_crash_at_the_sync_is_a_crash_before_it() -> None:
    fs = SimFileSystem()
    handle = fs.open_syncfs("/")
    written(fs)
    fs.crash_at(fs.operations, operations=["syncfs"])
    with pytest.raises(SimulatedCrash):
        handle.sync()
    assert survivors(fs) == {}
    assert fs.crash_image("keep_unsynced").read_bytes("/d/payloads/ab/x") == b"payload bytes"


def test_a_handle_needs_an_existing_directory() -> None:
    with pytest.raises(FileNotFoundError):
        SimFileSystem().open_syncfs("/nowhere")
