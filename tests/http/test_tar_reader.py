"""The batch's tar reader (``service.ops.tar_reader``), pure: bytes in, events out.

Every hostile shape of ``tests.http.tarkit.ATTACKS`` is read the way the server answers it,
in any chunking; the formats' corners (global records, name precedence, chained sparse
blocks, header-only types, old number spellings) are read as the standards say; and no
input makes the reader work for longer than its bytes.
"""

from __future__ import annotations

import doctest
from dataclasses import dataclass, field

import pytest

from service.ops import tar_reader
from service.ops.tar_reader import (
    ARCHIVE_END,
    MEMBER_END,
    NEED_DATA,
    Data,
    Kind,
    Member,
    TarFormatError,
    TarReader,
)
from tests.http.tarkit import (
    ATTACKS,
    END,
    GNU,
    base256,
    gnu_long_name,
    gnu_sparse,
    header,
    member,
    pad,
    pax,
)


@dataclass
class Read:
    """What a reader made of a stream: members with their data, and the calls it took."""

    members: list[tuple[Member, bytes]] = field(default_factory=list)
    calls: int = 0


def read(body: bytes, chunk: int | None = None, **limits: int) -> Read:
    """Drive a reader over ``body`` fed in pieces of ``chunk`` bytes (all at once: None)."""
    reader = TarReader(**limits)
    result = Read()
    position = 0
    step = chunk or max(1, len(body))
    while True:
        result.calls += 1
        event = reader.next_event()
        if event is NEED_DATA:
            if position < len(body):
                reader.feed(body[position : position + step])
                position += step
            else:
                reader.end()
        elif isinstance(event, Member):
            result.members.append((event, b""))
        elif isinstance(event, Data):
            last, data = result.members[-1]
            result.members[-1] = (last, data + event.data)
        elif event is ARCHIVE_END:
            return result
        else:
            assert event is MEMBER_END


def summary(result: Read) -> list[tuple[str, Kind, int, bytes]]:
    return [(m.name, m.kind, m.size, data) for m, data in result.members]


def test_doctests() -> None:
    failures, tried = doctest.testmod(tar_reader)
    assert failures == 0 and tried > 0


@pytest.mark.parametrize("name", sorted(ATTACKS))
@pytest.mark.parametrize("chunk", [None, 1, 511, 4096])
def test_every_attack_shape_is_read_as_the_server_answers_it(name: str, chunk: int | None) -> None:
    attack = ATTACKS[name]
    if attack.whole is not None:
        with pytest.raises(TarFormatError, match=attack.message or None):
            read(attack.body, chunk)
        return
    result = read(attack.body, chunk)
    kinds = [(m.name, m.kind) for m, _ in result.members]
    expected = [(key, Kind.FILE if code is None else Kind.REFUSED) for key, code in attack.members]
    assert kinds == expected
    for refused, data in result.members:
        if refused.kind is Kind.REFUSED:
            assert refused.refusal and data == b""  # refused before a byte of data


def test_a_sparse_bomb_is_refused_with_its_stored_bytes_skipped_unread() -> None:
    body = gnu_sparse("bomb", 1 << 40, b"z" * 1500, extension_blocks=[b"\x01" * 504] * 3)
    result = read(body + member("next", b"n") + END)
    (bomb, bomb_data), (after, after_data) = result.members
    assert (bomb.kind, bomb.size, bomb.refusal) == (
        Kind.REFUSED,
        1500,
        "a sparse file (GNU type S)",
    )
    assert bomb_data == b""
    assert (after.name, after_data) == ("next", b"n")


def test_skip_drops_a_file_members_data() -> None:
    reader = TarReader()
    reader.feed(member("big", b"b" * 5000) + member("small", b"s") + END)
    reader.end()
    first = reader.next_event()
    assert isinstance(first, Member) and first.name == "big"
    reader.skip()
    assert reader.next_event() is MEMBER_END
    second = reader.next_event()
    assert isinstance(second, Member) and second.name == "small"
    assert reader.next_event() == Data(b"s")


def test_global_records_apply_to_every_later_member_and_an_empty_value_unsets() -> None:
    body = (
        pax({"SERVICE.meta.team": "blue", "comment": "c"}, typeflag=b"g")
        + member("one", b"1")
        + pax({"SERVICE.meta.team": "red"})
        + member("two", b"2")
        + pax({"comment": ""}, typeflag=b"g")
        + member("three", b"3")
        + END
    )
    records = [dict(m.records) for m, _ in read(body).members]
    assert records == [
        {"SERVICE.meta.team": "blue", "comment": "c"},
        {"SERVICE.meta.team": "red", "comment": "c"},
        {"SERVICE.meta.team": "blue"},
    ]


def test_a_pax_path_beats_a_gnu_long_name_which_beats_the_header() -> None:
    body = (
        gnu_long_name(b"long/" + b"l" * 200)
        + member("short", b"1", magic=GNU)
        + gnu_long_name(b"from-L")
        + pax({"path": "from-pax"})
        + gnu_long_name(b"link-target", typeflag=b"K")
        + member("short", b"2", magic=GNU)
        + END
    )
    names = [m.name for m, _ in read(body).members]
    assert names == ["long/" + "l" * 200, "from-pax"]


def test_a_pax_size_replaces_the_headers_and_header_only_types_carry_no_data() -> None:
    body = (
        pax({"size": "700"})
        + member("sized", b"p" * 700, size=0)
        + member("dir", b"", size=4096, typeflag=b"5")
        + member("fifo", b"", size=99, typeflag=b"6")
        + member("last", b"L")
        + END
    )
    assert [(n, k, s, d) for n, k, s, d in summary(read(body))] == [
        ("sized", Kind.FILE, 700, b"p" * 700),
        ("dir", Kind.DIRECTORY, 0, b""),
        ("fifo", Kind.REFUSED, 0, b""),
        ("last", Kind.FILE, 1, b"L"),
    ]


def test_old_spellings_of_numbers_and_kinds_are_read() -> None:
    signed_sum = bytearray(header("signed", size=1, raw={290: b"\xe9"}))  # a uname byte over 127
    value = sum(b - 256 if b > 127 else b for b in signed_sum[:148] + b" " * 8 + signed_sum[156:])
    signed_sum[148:156] = b"%06o\x00 " % value
    body = (
        header("old-dir/", typeflag=b"\x00", magic=bytes(8))
        + header("spaced", size=b"     1274 \x00", mode=b"  644 \x00")
        + pad(b"v" * 700)
        + member("empty-fields", b"e", mode=bytes(8), mtime=b" " * 12)
        + member("base256", b"b" * 300, size=base256(300, 12), magic=GNU)
        + member("before-1970", b"t", mtime=base256(-86400, 12), magic=GNU)
        + member("prefixed", b"p", prefix=b"a/b")
        + member("contiguous", b"c", typeflag=b"7")
        + bytes(signed_sum)
        + pad(b"s")
        + END
    )
    assert [(n, k, s) for n, k, s, _ in summary(read(body))] == [
        ("old-dir/", Kind.DIRECTORY, 0),
        ("spaced", Kind.FILE, 700),
        ("empty-fields", Kind.FILE, 1),
        ("base256", Kind.FILE, 300),
        ("before-1970", Kind.FILE, 1),
        ("a/b/prefixed", Kind.FILE, 1),
        ("contiguous", Kind.FILE, 1),
        ("signed", Kind.FILE, 1),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (pax({"a": "1"}) + pax({"b": "2"}) + member("x", b"x") + END, "two extended headers"),
        (gnu_long_name(b"a") + gnu_long_name(b"b") + member("x") + END, "two extended headers"),
        (pax({"k": "v" * 70_000}, typeflag=b"g") + END, "extended header of"),
        (
            pax({"a": "x" * 40_000}, typeflag=b"g") + pax({"b": "y" * 40_000}, typeflag=b"g"),
            "global pax records",
        ),
        (member("m", mode=base256(1, 8)) + END, "mode"),
        (member("m", mtime=base256(-1, 12)[:1] + b"\x00" * 11) + END, "mtime"),
        (member("m", size=base256(10**18, 12), magic=GNU) + END, "out of range"),
        (pax({"uid": "1.5"}) + member("m") + END, "uid"),
        (pax({"mtime": "1e9"}) + member("m") + END, "mtime"),
        (pax(b"4 a=\n") + member("m") + END, "length"),
        (b"", "no end-of-archive"),
    ],
    ids=[
        "two-pax",
        "two-long-names",
        "global-too-big",
        "globals-together-too-big",
        "base256-mode",
        "base256-negative-zero-width",
        "base256-size-past-18-digits",
        "pax-uid-fraction",
        "pax-mtime-exponent",
        "record-too-short",
        "empty-body",
    ],
)
def test_malformed_streams_fail_as_a_whole(body: bytes, message: str | None) -> None:
    with pytest.raises(TarFormatError, match=message):
        read(body)


def test_the_member_cap_counts_directories_and_refused_members() -> None:
    body = member("d", typeflag=b"5") + member("l", typeflag=b"2") + member("f", b"f") + END
    assert len(read(body, max_members=3).members) == 3
    with pytest.raises(TarFormatError, match="at most 2 members"):
        read(body, max_members=2)


def test_a_declared_size_is_counted_down_only_by_bytes_that_arrived() -> None:
    """10^17 declared, 3 KiB sent: the stream's end is found after a handful of calls, not
    after 10^17 / 512 of them."""
    body = pax({"size": "1" + "0" * 17}) + member("endless", b"x" * 3000)
    for chunk in (None, 512):
        with pytest.raises(TarFormatError, match="cut short"):
            read(body, chunk)
    reader = TarReader()
    reader.feed(body)
    reader.end()
    first = reader.next_event()
    assert isinstance(first, Member) and first.size == 10**17
    reader.skip()
    with pytest.raises(TarFormatError, match="inside a member's data"):
        reader.next_event()


def test_the_end_of_the_archive_drops_what_follows() -> None:
    reader = TarReader()
    reader.feed(member("a", b"a") + END)
    events = [reader.next_event() for _ in range(4)]
    assert events[2:] == [MEMBER_END, ARCHIVE_END]
    reader.feed(b"padding after the end" * 100)
    assert reader.next_event() is ARCHIVE_END
    reader.end()
    assert reader.next_event() is ARCHIVE_END


def test_a_failed_reader_stays_failed() -> None:
    reader = TarReader()
    reader.feed(header("x", checksum=b"0000001\x00"))
    with pytest.raises(TarFormatError, match="checksum"):
        reader.next_event()
    with pytest.raises(TarFormatError, match="already failed"):
        reader.next_event()
