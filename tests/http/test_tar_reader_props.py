"""Properties of the batch's tar reader against Python's own ``tarfile``.

- Whatever member list ``tarfile`` writes (ustar, GNU and pax formats; long and non-ASCII
  names, directories, links, pax records, ids and times that need base-256 or pax records),
  fed in any chunking, the reader yields exactly the files written (names and bytes) and
  the kinds, sizes, bytes and records that ``tarfile`` reads back (names compared without
  trailing slashes, which ``tarfile`` strips from directories and pax paths).
- Random damage to such archives (flipped bits, cuts, inserted and replaced bytes) makes the
  reader raise nothing but its own ``TarFormatError``, after a number of calls bounded by the
  bytes it was given.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.ops.tar_reader import Kind, TarFormatError
from tests.http.test_tar_reader import read

FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}
_name_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


@dataclass(frozen=True)
class Entry:
    name: str
    kind: bytes
    data: bytes
    uid: int
    mtime: int
    records: tuple[tuple[str, str], ...]


entries = st.builds(
    Entry,
    name=st.text(_name_chars, min_size=1, max_size=40).map(lambda n: n.lstrip("/") or "n")
    | st.text("ab/", min_size=90, max_size=300).map(lambda n: "x" + n.replace("//", "/")),
    kind=st.sampled_from([tarfile.REGTYPE, tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE]),
    data=st.binary(max_size=1500),
    uid=st.integers(0, 2**40),
    mtime=st.integers(-(2**33), 2**40),
    records=st.lists(
        st.tuples(
            st.sampled_from(["SERVICE.sha256", "SERVICE.meta.k", "comment"]),
            st.text(_name_chars, min_size=1, max_size=20),
        ),
        max_size=2,
    ).map(tuple),
)


def write(members: list[Entry], fmt: int) -> bytes | None:
    """The archive ``tarfile`` writes, or None when the format cannot hold the list."""
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w|", format=fmt) as archive:
            for entry in members:
                info = tarfile.TarInfo(entry.name)
                info.type, info.uid, info.mtime = entry.kind, entry.uid, entry.mtime
                if entry.kind == tarfile.SYMTYPE:
                    info.linkname = "target"
                if fmt == tarfile.PAX_FORMAT:
                    info.pax_headers = dict(entry.records)
                if entry.kind == tarfile.REGTYPE:
                    info.size = len(entry.data)
                    archive.addfile(info, io.BytesIO(entry.data))
                else:
                    archive.addfile(info)
    except ValueError:  # e.g. ustar and a 300-character name, or a negative time
        return None
    return buffer.getvalue()


def tarfile_view(body: bytes) -> list[tuple[str, Kind, int, bytes, dict[str, str]]]:
    kinds = {tarfile.REGTYPE: Kind.FILE, tarfile.DIRTYPE: Kind.DIRECTORY}
    seen = []
    with tarfile.open(fileobj=io.BytesIO(body), mode="r|") as archive:
        for info in archive:
            body_file = archive.extractfile(info) if info.isreg() else None
            data = body_file.read() if body_file is not None else b""
            name = info.name.rstrip("/")
            size = info.size if info.isreg() else 0
            records = {k: v for k, v in info.pax_headers.items() if k not in _STANDARD}
            seen.append((name, kinds.get(info.type, Kind.REFUSED), size, data, records))
    return seen


_STANDARD = {"path", "linkpath", "size", "uid", "gid", "uname", "gname", "mtime"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    members=st.lists(entries, max_size=6),
    fmt=st.sampled_from(sorted(FORMATS)),
    chunk=st.sampled_from([None, 1, 100, 512, 700, 10_000]),
)
def test_what_tarfile_writes_the_reader_reads_exactly_as_tarfile_does(
    members: list[Entry], fmt: str, chunk: int | None
) -> None:
    body = write(members, FORMATS[fmt])
    if body is None:
        return
    result = read(body, chunk)
    ours = [
        (
            m.name.rstrip("/"),  # tarfile strips a directory's, and a pax path's
            m.kind,
            m.size,
            data,
            {k: v for k, v in m.records.items() if k not in _STANDARD},
        )
        for m, data in result.members
    ]
    assert ours == tarfile_view(body)
    files = [(e.name, e.data) for e in members if e.kind == tarfile.REGTYPE]
    assert [(m.name, data) for m, data in result.members if m.kind is Kind.FILE] == files


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    body = None
    while body is None:
        body = write(
            draw(st.lists(entries, min_size=1, max_size=3)),
            FORMATS[draw(st.sampled_from(sorted(FORMATS)))],
        )
    data = bytearray(body)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "cut", "insert", "replace"]))
        position = draw(st.integers(0, len(data) - 1)) if data else 0
        if action == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[position:]
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=600))
        elif data:
            piece = draw(st.binary(min_size=1, max_size=24))
            data[position : position + len(piece)] = piece
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=damaged(), chunk=st.sampled_from([None, 1, 333, 4096]))
def test_damaged_archives_raise_only_the_readers_own_error_and_never_spin(
    body: bytes, chunk: int | None
) -> None:
    try:
        result = read(body, chunk)
    except TarFormatError:
        return
    pieces = len(body) // (chunk or max(1, len(body))) + 2
    assert result.calls <= 4 * (len(body) // 512 + pieces) + 10
