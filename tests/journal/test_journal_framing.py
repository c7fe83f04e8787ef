"""Record framing on plain bytes, the package surface, and replay's memory bound."""

from __future__ import annotations

import ast
import asyncio
import doctest
import pathlib
import sys
import tracemalloc
from collections.abc import Callable

import pytest

import journal
from fsseam.fs import RealFileSystem
from journal import Journal, framing, segment, snapshot
from journal.framing import Damage, encode_batch, encode_event, encode_record, salvage, scan
from journal.segment import segment_name
from tests.journal.journal_testkit import (
    event,
    fix_checksum,
    increment_byte,
    set_field,
    shrink_size,
)

PACKAGE = pathlib.Path(journal.__file__).parent
BODY = encode_event({"type": "T", "v": 1})
SIZE = len(encode_record(1, 0, BODY))
THIRD = 2 * SIZE


def three_records() -> bytes:
    return encode_batch(1, 0, [BODY, BODY, BODY])


def test_doctests_of_the_pure_helpers_pass() -> None:
    for module in (framing, segment, snapshot):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


def test_scan_reads_consecutive_records_to_the_end() -> None:
    data = three_records()
    result = scan(data, 0, 1, 100)
    assert (result.position, result.next_sequence, result.damage) == (len(data), 4, None)


@pytest.mark.parametrize(
    ("damage", "expected", "position"),
    [
        (lambda data: shrink_size(data, 1), Damage.SHORT, THIRD),
        (lambda data: data + b"\xc1JR", Damage.SHORT, 3 * SIZE),
        (lambda data: data + bytes(40), Damage.BAD_MAGIC, 3 * SIZE),
        (lambda data: increment_byte(data, THIRD + 30), Damage.BAD_CHECKSUM, THIRD),
        (lambda data: set_field(data, THIRD, "length", 0), Damage.BAD_LENGTH, THIRD),
        (
            lambda data: fix_checksum(set_field(data, THIRD, "sequence", 5), THIRD),
            Damage.BAD_SEQUENCE,
            THIRD,
        ),
        (
            lambda data: fix_checksum(set_field(data, THIRD, "durable", 3), THIRD),
            Damage.BAD_DURABLE,
            THIRD,
        ),
    ],
    ids=["short", "short-header", "zeros", "checksum", "length", "sequence", "durable"],
)
def test_scan_stops_at_the_first_bad_record(
    damage: Callable[[bytes], bytes], expected: Damage, position: int
) -> None:
    result = scan(damage(three_records()), 0, 1, 100)
    assert (result.damage, result.position) == (expected, position)


def test_length_is_bounded_before_it_is_trusted() -> None:
    data = set_field(three_records(), 0, "length", 2**32 - 1)
    result = scan(data, 0, 1, 100)
    assert (result.damage, result.position, result.needed) == (Damage.BAD_LENGTH, 0, 0)


def test_a_plausible_length_past_the_end_asks_for_more_bytes() -> None:
    record = encode_record(1, 0, b"\x81\xa4type\xa1x" + b"\x00" * 50)
    result = scan(record[:40], 0, 1, 1000)
    assert (result.damage, result.needed) == (Damage.SHORT, len(record))


def test_salvage_finds_good_records_after_garbage() -> None:
    data = b"garbage" + encode_record(5, 3, BODY) + b"\xc1JRN junk" + encode_record(9, 8, BODY)
    found = salvage(data, 0, 100)
    assert (found.records, found.max_sequence, found.max_durable) == (2, 9, 8)


def test_salvage_ignores_records_with_implausible_durable_marks() -> None:
    data = fix_checksum(set_field(encode_record(5, 3, BODY), 0, "durable", 5), 0)
    assert salvage(data, 0, 100).records == 0


def test_encode_event_requires_a_typed_map() -> None:
    with pytest.raises(TypeError):
        encode_event([("type", "x")])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        encode_event({"kind": "x"})


def test_package_exports_its_public_names() -> None:
    for name in journal.__all__:
        assert getattr(journal, name) is not None
    assert {
        "Journal",
        "JournalOptions",
        "Record",
        "Snapshot",
        "JournalStats",
        "JournalError",
        "JournalCorruptionError",
        "JournalFailedError",
        "JournalClosedError",
        "FileSystem",
        "RealFileSystem",
    } <= set(journal.__all__)


def test_journal_imports_only_msgpack_crc32c_the_seam_and_the_standard_library() -> None:
    allowed = {"msgpack", "crc32c", "journal", "fsseam", *sys.stdlib_module_names}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def _write_log(directory: str, count: int) -> None:
    fs = RealFileSystem()
    fs.mkdir(directory)
    file = fs.create(f"{directory}/{segment_name(1)}")
    bodies = [encode_event(event(number)) for number in range(1, count + 1)]
    file.write(encode_batch(1, 0, bodies))
    file.close()


def _replay_peak(directory: str) -> int:
    tracemalloc.start()
    try:
        opened = Journal.open(directory)
        count = sum(1 for _ in opened.replay())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    asyncio.run(opened.close())
    assert count > 0
    return peak


def test_replay_memory_does_not_grow_with_the_log(tmp_path: pathlib.Path) -> None:
    _write_log(str(tmp_path / "small"), 10_000)
    _write_log(str(tmp_path / "large"), 40_000)
    small = _replay_peak(str(tmp_path / "small"))
    large = _replay_peak(str(tmp_path / "large"))
    assert large < small + 512 * 1024, (small, large)


def test_the_worked_example_of_the_format_doc_matches_the_encoder() -> None:
    doc = (PACKAGE.parent / "docs" / "journal-format.md").read_text()
    first = encode_record(1, 0, encode_event({"type": "BucketCreated", "name": "photos"}))
    second = encode_record(2, 1, encode_event({"type": "BucketDeleted", "name": "photos"}))
    assert len(first) + len(second) == 120
    assert first[4:8].hex(" ") in doc
    assert first[28:48].hex(" ") in doc
    assert second[:12].hex(" ") in doc


def test_the_file_system_seam_imports_nothing_of_ours() -> None:
    seam = PACKAGE.parent / "fsseam"
    allowed = {"fsseam", *sys.stdlib_module_names}
    for path in seam.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert (node.module or "").split(".")[0] in allowed, f"{path.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in allowed, f"{path.name}"
