"""``service.storage.repair``: a quarantined payload put back only from a verified copy, in the
order that survives a crash (fsynced, renamed, its directory fsynced, then the quarantine
entry removed and that directory fsynced), and nothing left behind by a refused copy."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fsseam.fs import RealFileSystem
from service.storage import PayloadIntegrity, PayloadStore
from service.storage.layout import Layout
from service.storage.repair import CopyRefused, place_repaired
from tests.storage.conftest import RecordingFileSystem

GOOD = os.urandom(300_000)


def quarantined_payload(root: Path) -> tuple[Layout, PayloadIntegrity, str]:
    """A store whose one payload rotted and was quarantined."""
    fs = RealFileSystem()
    store = PayloadStore(str(root), fs=fs, durability="strict")
    payload_id = store.next_payload_id()
    store.store_small(GOOD, payload_id)
    path = Path(store.layout.payload_path(payload_id))
    path.write_bytes(GOOD[:-1] + bytes([GOOD[-1] ^ 1]))
    integrity = PayloadIntegrity(fs, store.layout)
    integrity.quarantine(payload_id)
    assert not path.exists()
    return store.layout, integrity, payload_id


def chunks(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)]


def test_a_verified_copy_is_placed_durably_and_the_quarantine_lifted_last(tmp_path: Path) -> None:
    layout, integrity, payload_id = quarantined_payload(tmp_path)
    fs = RecordingFileSystem()
    sha = hashlib.sha256(GOOD).hexdigest()
    place_repaired(fs, layout, payload_id, len(GOOD), sha, chunks(GOOD))
    assert Path(layout.payload_path(payload_id)).read_bytes() == GOOD
    assert integrity.quarantined_ids() == set()
    assert os.listdir(layout.staging_dir) == []
    kinds = [kind for kind, _ in fs.events if kind != "write"]
    assert kinds == ["create", "fsync", "rename", "fsync_dir", "unlink", "fsync_dir"]
    assert fs.events[-1] == ("fsync_dir", layout.quarantine_dir)
    assert fs.events[-3] == ("fsync_dir", layout.payload_dir(payload_id))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (GOOD[:-1] + b"\0", "SHA-256"),
        (GOOD[:-1], "bytes"),
        (GOOD + b"x", "longer"),
    ],
    ids=["rotten", "short", "long"],
)
def test_a_copy_that_fails_its_check_changes_nothing(
    tmp_path: Path, body: bytes, problem: str
) -> None:
    layout, integrity, payload_id = quarantined_payload(tmp_path)
    sha = hashlib.sha256(GOOD).hexdigest()
    with pytest.raises(CopyRefused, match=problem):
        place_repaired(RealFileSystem(), layout, payload_id, len(GOOD), sha, chunks(body))
    assert not Path(layout.payload_path(payload_id)).exists()
    assert integrity.quarantined_ids() == {payload_id}
    assert os.listdir(layout.staging_dir) == []


def test_a_crash_before_the_quarantine_is_lifted_moves_the_copy_aside_at_the_next_start(
    tmp_path: Path,
) -> None:
    """The repaired file beside its quarantine entry (a crash between the two steps): the
    start trusts the quarantine, so the scrub repairs it again at its next pass."""
    layout, integrity, payload_id = quarantined_payload(tmp_path)
    Path(layout.payload_path(payload_id)).write_bytes(GOOD)
    assert integrity.finish_quarantine({payload_id}) == 1
    assert not Path(layout.payload_path(payload_id)).exists()
    assert integrity.quarantined_ids() == {payload_id}
