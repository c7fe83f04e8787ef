"""Parts written in place (``service.storage.direct``) on the simulated disk: ids, regions
written out of order, the seal that turns the upload's file into the object, and what a
power cut keeps of an acknowledged (strict) part."""

from __future__ import annotations

import doctest
import hashlib

import pytest

from fsseam.durable import make_dirs_durably
from fsseam.simfs import SimFileSystem
from service.multipart import operations as multipart
from service.storage import PayloadIntegrity, direct
from service.storage.payloads import PayloadStore

ROOT = "/data"
UPLOAD = "0123456789abcdef0123456789abcdef"
S = 16


def store(fs: SimFileSystem, durability: str = "strict") -> PayloadStore:
    make_dirs_durably(fs, ROOT)
    return PayloadStore(ROOT, fs=fs, durability=durability)  # type: ignore[arg-type]


def write_part(payloads: PayloadStore, number: int, data: bytes) -> direct.DirectStaged:
    writer = payloads.open_direct_part(UPLOAD, (number - 1) * S, len(data))
    writer.write_batch([data[:5], data[5:]])
    return writer.finish()


def test_doctests_pass() -> None:
    for module in (direct, multipart):
        result = doctest.testmod(module)
        assert result.attempted > 0
        assert result.failed == 0
    assert multipart.recommended_part_size(None, 2 * 1024 * 1024) == 2 * 1024 * 1024


@pytest.mark.parametrize(
    "value",
    ["", "a.b", "u1.10.5", "u1.10.5.ab.cd", "u/1.10.5.ab", "u1.-1.5.ab", "u1.10.5.a/b", "é.1.1.a"],
)
def test_only_well_formed_direct_ids_parse(value: str) -> None:
    assert direct.parse_direct_id(value) is None
    assert not direct.is_direct_id(value)


def test_parts_written_out_of_order_land_at_their_offsets_and_verify() -> None:
    fs = SimFileSystem()
    payloads = store(fs)
    three = write_part(payloads, 3, b"tail!")
    one = write_part(payloads, 1, b"a" * S)
    two = write_part(payloads, 2, b"b" * S)
    assert fs.read_bytes(payloads.direct_file(UPLOAD)) == b"a" * S + b"b" * S + b"tail!"
    assert direct.parse_direct_id(three.payload_id) == (UPLOAD, 2 * S, 5)
    for part, data in ((one, b"a" * S), (two, b"b" * S), (three, b"tail!")):
        assert part.sha256 == hashlib.sha256(data).hexdigest()
        assert direct.parse_direct_id(part.payload_id) is not None
        assert payloads.verify(part.payload_id, part.size, part.sha256)
    assert not payloads.verify(one.payload_id, one.size, two.sha256)
    assert payloads.remove([one.payload_id]) == 0  # a region is never a file of its own
    assert payloads.verify(one.payload_id, one.size, one.sha256)


def test_a_part_longer_than_its_region_is_refused() -> None:
    payloads = store(SimFileSystem())
    writer = payloads.open_direct_part(UPLOAD, 0, S)
    with pytest.raises(OSError):
        writer.write_batch([b"x" * (S + 1)])


def test_an_acknowledged_strict_part_survives_a_power_cut() -> None:
    fs = SimFileSystem()
    payloads = store(fs)
    part = write_part(payloads, 2, b"c" * S)
    image = fs.crash_image("lose_unsynced")
    survivor = PayloadStore(ROOT, fs=image, durability="strict")
    assert survivor.verify(part.payload_id, part.size, part.sha256)


def test_seal_copies_hashes_cuts_and_links_and_keeps_the_parts_readable() -> None:
    fs = SimFileSystem()
    payloads = store(fs)
    one = write_part(payloads, 1, b"a" * S)
    write_part(payloads, 3, b"stale bytes past the end")  # a region no manifest names
    own = payloads.create_staging()
    own.write(b"B" * S)
    staged_two = own.finish()
    payloads.promote(staged_two, "f" * 32)
    digest = hashlib.sha256(b"a" * S)
    plan = direct.SealPlan([("f" * 32, S)], S, digest.copy(), 2 * S)
    sealed = payloads.seal_direct(UPLOAD, plan)
    whole = b"a" * S + b"B" * S
    assert sealed.size == 2 * S
    assert sealed.sha256 == hashlib.sha256(whole).hexdigest()
    assert fs.read_bytes(sealed.path) == whole
    assert payloads.verify(one.payload_id, one.size, one.sha256)  # the upload's file remains
    assert payloads.remove_direct(UPLOAD)
    assert fs.read_bytes(sealed.path) == whole  # the object's name keeps the bytes


def test_the_sweep_removes_only_files_of_closed_uploads() -> None:
    fs = SimFileSystem()
    payloads = store(fs)
    write_part(payloads, 1, b"a" * S)
    assert payloads.sweep_direct({UPLOAD}, 0) == 0
    assert payloads.direct_uploads() == [UPLOAD]
    assert payloads.sweep_direct(set(), 0) == 1
    assert payloads.direct_uploads() == []


def test_a_balanced_part_is_not_on_disk_until_synced() -> None:
    """The contrast: without the fsync a power cut loses the region; the checkpoint's sync
    (``PayloadIntegrity.sync_payloads`` of the part's id) is what covers it."""
    fs = SimFileSystem()
    payloads = store(fs, "balanced")
    part = write_part(payloads, 2, b"c" * S)
    lost = PayloadStore(ROOT, fs=fs.crash_image("lose_unsynced"), durability="balanced")
    assert not lost.verify(part.payload_id, part.size, part.sha256)
    assert PayloadIntegrity(fs, payloads.layout).sync_payloads([part.payload_id]) == 1
    kept = PayloadStore(ROOT, fs=fs.crash_image("lose_unsynced"), durability="balanced")
    assert kept.verify(part.payload_id, part.size, part.sha256)
