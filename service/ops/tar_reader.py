"""An incremental reader of tar streams: bytes in, events out, no I/O.

Why our own: ``tarfile``'s stream mode trusts what a header declares. It expands a GNU
sparse member to its declared real size (2 KiB in, 1 GiB out), seeks over a declared size
block by block however far it is (a pax ``size`` of 10^30 never ends), reads numbers with
``int()`` (digits of any script) and lets ``ValueError`` and ``RecursionError`` out of
malformed shapes. The formats a batch needs are small and well specified (POSIX.1-2001
ustar and pax, GNU's long names), so this module reads them itself, in the spirit of h11:
the caller ``feed``s bytes and ``end``s the stream, and ``next_event`` hands back what
they make.

Rules of this module:

1. No I/O, no threads, no clocks, no imports of the service: the caller owns the bytes.
2. Work is bounded by the bytes fed: a declared size is only ever counted down by bytes
   that arrived, so no input can make a call loop or spin, and skipping a member's data
   costs what the body carries, never what the header claims.
3. Every number is checked before use: octal fields are ASCII octal digits between spaces
   and NULs (base-256 where GNU writes it: sizes, ids, times, device numbers); pax numbers
   are ASCII decimal digits of bounded length. Names are strict UTF-8.
4. The one exception raised is ``TarFormatError``; after it the reader is dead.

Layout of a 512-byte header block (POSIX ustar; GNU differs from offset 345 on):

=========  ======  =============================================================
offset     bytes   field
=========  ======  =============================================================
0          100     name (NUL-terminated when shorter)
100        8       mode, octal
108/116    8/8     uid, gid (octal; base-256 in GNU)
124        12      size of the data that follows (octal; base-256 in GNU)
136        12      mtime (octal; base-256, possibly negative, in GNU)
148        8       checksum: sum of the block's bytes with this field as spaces
156        1       typeflag
157        100     linkname
257        8       magic and version: ``ustar\\0`` ``00`` (POSIX), ``ustar  \\0`` (GNU)
329/337    8/8     devmajor, devminor
345        155     POSIX: name prefix (name = prefix "/" name)
345..495           GNU: atime, ctime, ..., 4 sparse entries at 386, isextended at 482
=========  ======  =============================================================

Extended headers attach to the next member: pax ``x`` (records ``"%d %s=%s\\n"``, UTF-8,
its ``path`` and ``size`` override the header's), GNU ``L`` (a long name) and ``K`` (a long
link name, read and dropped). Pax ``g`` records apply to every later member. Each extended
header holds at most ``max_extended`` bytes (checked before its data is read), at most one
of each kind precedes a member, and the global records together stay under the same cap.

A member is an ``Member`` event whose ``kind`` says what the caller may do with it:
``FILE`` (types ``0``, NUL and ``7``: its data follows as ``Data`` events unless the caller
calls ``skip``), ``DIRECTORY`` (type ``5``, or a NUL type named with a trailing ``/``) or
``REFUSED`` with the reason: links, devices and FIFOs (types ``1``-``4``, ``6``, which carry
no data whatever their size says), GNU sparse files (type ``S``, whose chained ``isextended``
blocks are skipped unread, and pax ``GNU.sparse.*`` records), multi-volume parts, volume
labels and any other type. A refused member's data is skipped by the reader itself. Every
member ends with ``MEMBER_END``; the first all-zero block is ``ARCHIVE_END``, after which
fed bytes are dropped.

Thread-safety: none; one reader belongs to one thread at a time.
"""

from __future__ import annotations

import enum
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

BLOCK: Final = 512
MAX_EXTENDED_BYTES: Final = 64 * 1024
"""Bytes of one pax or GNU long-name header (and of all global records together): a key
(1 KiB) and its metadata (8 KiB) need far less."""
MAX_SIZE: Final = 10**18 - 1
"""The largest size, id or time taken: 18 decimal digits, as every number of the API."""
MAX_DECIMAL_DIGITS: Final = 18

POSIX_MAGIC: Final = b"ustar\x0000"
GNU_MAGIC: Final = b"ustar  \x00"

_FILE_TYPES = frozenset(b"0\x007")
_HEADER_ONLY = {
    ord("1"): "a hard link",
    ord("2"): "a symbolic link",
    ord("3"): "a character device",
    ord("4"): "a block device",
    ord("5"): "a directory",
    ord("6"): "a FIFO",
}
_OTHER_REFUSED = {
    ord("S"): "a sparse file (GNU type S)",
    ord("M"): "a multi-volume continuation",
    ord("V"): "a volume label",
    ord("D"): "a GNU directory dump",
}
_PAX_DECIMAL = re.compile(rf"[0-9]{{1,{MAX_DECIMAL_DIGITS}}}")
_PAX_TIME = re.compile(rf"-?[0-9]{{1,{MAX_DECIMAL_DIGITS}}}(?:\.[0-9]{{1,{MAX_DECIMAL_DIGITS}}})?")
_PAX_NUMBERS = {"size": _PAX_DECIMAL, "uid": _PAX_DECIMAL, "gid": _PAX_DECIMAL}
_PAX_TIMES = ("mtime", "atime", "ctime")
_OCTAL_DIGITS = frozenset(b"01234567")
SPARSE_PREFIX: Final = "GNU.sparse."


class TarFormatError(Exception):
    """The stream is not a well-formed tar archive (the message says where and why)."""


class Kind(enum.Enum):
    FILE = "file"
    DIRECTORY = "directory"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Member:
    """A member's header, extended headers applied."""

    name: str
    kind: Kind
    size: int
    """Bytes of data that follow it in the archive (0 for header-only types)."""
    records: Mapping[str, str]
    """The pax records in force: the global ones, then its own."""
    refusal: str = ""
    """For ``REFUSED``: what it is (``"a symbolic link"``)."""


@dataclass(frozen=True, slots=True)
class Data:
    """Bytes of the current member's data, in order."""

    data: bytes


class _Marker(enum.Enum):
    NEED_DATA = "need data"
    MEMBER_END = "member end"
    ARCHIVE_END = "archive end"


NEED_DATA: Final = _Marker.NEED_DATA
MEMBER_END: Final = _Marker.MEMBER_END
ARCHIVE_END: Final = _Marker.ARCHIVE_END
Event = Member | Data | _Marker


class _State(enum.Enum):
    HEADER = 1
    EXTENDED = 2
    SPARSE_BLOCKS = 3
    DATA = 4
    PADDING = 5
    DONE = 6
    FAILED = 7


class TarReader:
    """See the module docstring. ``next_event`` returns ``NEED_DATA`` until more bytes are
    fed or the stream is ended; after ``end`` it never returns ``NEED_DATA`` again."""

    def __init__(
        self, *, max_members: int = 10_000, max_extended: int = MAX_EXTENDED_BYTES
    ) -> None:
        self.max_members = max_members
        self.max_extended = max_extended
        self.members = 0
        """Member events so far (extended headers are not members)."""
        self.offset = 0
        """Bytes of the stream consumed so far."""
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._ended = False
        self._state = _State.HEADER
        self._remaining = 0
        self._skipping = False
        self._extended_type = 0
        self._extended_size = 0
        self._extended: dict[int, bytes] = {}
        """Extended headers read for the next member, by type (``x``, ``L``, ``K``)."""
        self._globals: dict[str, str] = {}
        self._pending_header: tuple[int, str, int] = (0, "", 0)
        """Typeflag, name and size of a header whose chained sparse blocks are being skipped."""
        self._pending_size = 0
        """The current member's data size (its padding follows it)."""

    # -- the caller's side -------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """More bytes of the stream (dropped once the archive ended)."""
        if self._ended:
            raise RuntimeError("feed after end")
        if data and self._state is not _State.DONE:
            self._chunks.append(bytes(data))
            self._buffered += len(data)

    def end(self) -> None:
        """The stream ended: what is missing now is missing for good."""
        self._ended = True

    def skip(self) -> None:
        """Drop the rest of the current member's data instead of handing it out."""
        if self._state is _State.DATA:
            self._skipping = True

    def next_event(self) -> Event:
        """The next event, ``NEED_DATA`` when the bytes fed so far end inside one, or
        ``TarFormatError``."""
        try:
            return self._next()
        except TarFormatError:
            self._state = _State.FAILED
            raise

    # -- the states --------------------------------------------------------------------------

    def _next(self) -> Event:
        while True:
            state = self._state
            if state is _State.FAILED:
                raise TarFormatError("the reader already failed")
            if state is _State.DONE:
                return ARCHIVE_END
            if state is _State.DATA:
                event = self._data()
                if event is not None:
                    return event
                continue
            if state is _State.PADDING:
                if not self._consume(self._remaining):
                    return self._missing("inside a member's padding")
                self._state = _State.HEADER
                return MEMBER_END
            if state is _State.EXTENDED:
                needed = self._extended_size + (-self._extended_size % BLOCK)
                data = self._take(needed)
                if data is None:
                    return self._missing("inside an extended header")
                self._extended_done(data[: self._extended_size])
                continue
            block = self._take(BLOCK)
            if block is None:
                where = "inside a sparse header" if state is _State.SPARSE_BLOCKS else "at a header"
                return self._missing(where)
            if state is _State.SPARSE_BLOCKS:
                if block[504] == 0:  # the last of the chained sparse blocks
                    return self._start_member()
                continue
            event = self._header(block)
            if event is not None:
                return event

    def _missing(self, where: str) -> Event:
        if not self._ended:
            return NEED_DATA
        if where == "at a header" and self._buffered == 0:
            raise TarFormatError("no end-of-archive block (cut short after a member)")
        raise TarFormatError(f"the body ends {where} (cut short)")

    def _data(self) -> Event | None:
        """The next piece of a member's data; None once it is all consumed."""
        if self._remaining == 0:
            self._remaining = -self._pending_size % BLOCK
            self._state = _State.PADDING
            return None
        if not self._buffered:
            return self._missing("inside a member's data")
        piece = self._take_some(self._remaining)
        self._remaining -= len(piece)
        if self._skipping:
            return None
        return Data(piece)

    # -- headers -----------------------------------------------------------------------------

    def _header(self, block: bytes) -> Event | None:
        if not any(block):
            if self._extended:
                raise TarFormatError("an extended header is followed by the end of the archive")
            self._state = _State.DONE
            self._chunks.clear()
            self._buffered = 0
            return ARCHIVE_END
        _check_checksum(block)
        magic = block[257:265]
        gnu = magic == GNU_MAGIC
        extended_fields = gnu or magic == POSIX_MAGIC
        typeflag = block[156]
        size = _number(block[124:136], "size", base256=True)
        _number(block[100:108], "mode", base256=False)
        _number(block[108:116], "uid", base256=True)
        _number(block[116:124], "gid", base256=True)
        _number(block[136:148], "mtime", base256=True, signed=True)
        if extended_fields:
            _number(block[329:337], "devmajor", base256=True)
            _number(block[337:345], "devminor", base256=True)
        if gnu:
            _number(block[345:357], "atime", base256=True, signed=True)
            _number(block[357:369], "ctime", base256=True, signed=True)
        if typeflag in b"xXgLK":
            self._start_extended(typeflag, size)
            return None
        name = _field_text(block[0:100], "name")
        if magic == POSIX_MAGIC and block[345]:
            name = _field_text(block[345:500], "name prefix") + "/" + name
        self._pending_header = (typeflag, name, size)
        if typeflag == ord("S") and block[482]:
            self._state = _State.SPARSE_BLOCKS  # skip the chained sparse map, unread
            return None
        return self._start_member()

    def _start_extended(self, typeflag: int, size: int) -> None:
        kind = ord("x") if typeflag == ord("X") else typeflag
        if size > self.max_extended:
            raise TarFormatError(
                f"an extended header of {size} bytes (at most {self.max_extended})"
            )
        if kind in self._extended:
            raise TarFormatError(f"two extended headers of type {chr(kind)!r} for one member")
        self._extended_type = kind
        self._extended_size = size
        self._state = _State.EXTENDED

    def _extended_done(self, data: bytes) -> None:
        kind = self._extended_type
        self._state = _State.HEADER
        if kind == ord("g"):
            for keyword, value in _pax_records(data).items():
                if value:
                    self._globals[keyword] = value
                else:
                    self._globals.pop(keyword, None)
            if sum(len(k) + len(v) for k, v in self._globals.items()) > self.max_extended:
                raise TarFormatError(f"global pax records over {self.max_extended} bytes")
            return
        self._extended[kind] = data

    def _start_member(self) -> Event:
        typeflag, header_name, size = self._pending_header
        self.members += 1
        if self.members > self.max_members:
            raise TarFormatError(f"a batch holds at most {self.max_members} members")
        records = dict(self._globals)
        long_name = None
        if (pax := self._extended.pop(ord("x"), None)) is not None:
            for keyword, value in _pax_records(pax).items():
                if value:
                    records[keyword] = value
                else:
                    records.pop(keyword, None)
        if (long := self._extended.pop(ord("L"), None)) is not None:
            long_name = _field_text(long, "GNU long name")
        self._extended.clear()  # a long link name (K) is read and dropped
        _check_pax_numbers(records)
        name = records.get("path") or long_name or header_name
        if "size" in records:
            size = int(records["size"])
        kind, refusal = _kind(typeflag, name)
        if kind is Kind.FILE and any(k.startswith(SPARSE_PREFIX) for k in records):
            kind, refusal = Kind.REFUSED, "a sparse file (pax GNU.sparse records)"
            name = records.get(SPARSE_PREFIX + "name") or name
        data_size = 0 if typeflag in _HEADER_ONLY or kind is Kind.DIRECTORY else size
        member = Member(name=name, kind=kind, size=data_size, records=records, refusal=refusal)
        self._pending_size = data_size
        self._remaining = data_size
        self._skipping = kind is not Kind.FILE
        self._state = _State.DATA
        return member

    # -- the buffer --------------------------------------------------------------------------

    def _take(self, count: int) -> bytes | None:
        """Exactly ``count`` bytes, or None (nothing taken) while fewer are buffered."""
        if self._buffered < count:
            return None
        if count == 0:
            return b""
        pieces = []
        wanted = count
        while wanted:
            pieces.append(self._take_some(wanted))
            wanted -= len(pieces[-1])
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _consume(self, count: int) -> bool:
        """Drop ``count`` bytes; False (nothing dropped) while fewer are buffered."""
        return self._take(count) is not None

    def _take_some(self, most: int) -> bytes:
        """Up to ``most`` bytes of the first buffered chunk (some are buffered)."""
        chunk = self._chunks[0]
        if len(chunk) <= most:
            self._chunks.popleft()
            piece = chunk
        else:
            piece = chunk[:most]
            self._chunks[0] = chunk[most:]
        self._buffered -= len(piece)
        self.offset += len(piece)
        return piece


# -- pure helpers ------------------------------------------------------------------------------


def _kind(typeflag: int, name: str) -> tuple[Kind, str]:
    if typeflag == ord("5") or (typeflag == 0 and name.endswith("/")):
        return Kind.DIRECTORY, ""
    if typeflag in _FILE_TYPES:
        return Kind.FILE, ""
    refusal = (
        _HEADER_ONLY.get(typeflag)
        or _OTHER_REFUSED.get(typeflag)
        or f"a member of unknown type {bytes([typeflag])!r}"
    )
    return Kind.REFUSED, refusal


def _check_checksum(block: bytes) -> None:
    """The header checksum, unsigned or signed as old writers summed (``tarfile`` too)."""
    stored = _number(block[148:156], "checksum", base256=False)
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    if stored == unsigned:
        return
    high = sum(1 for byte in block if byte > 127) - sum(1 for byte in block[148:156] if byte > 127)
    if stored != unsigned - 256 * high:
        raise TarFormatError("a header's checksum does not match (a damaged header)")


def _number(field: bytes, what: str, *, base256: bool, signed: bool = False) -> int:
    """A numeric header field: octal digits between spaces and NULs (empty: 0), or GNU's
    base-256 (a leading 0x80 byte, 0xff when negative) where ``base256``.

    >>> _number(b"0000644\\x00", "mode", base256=False), _number(b"   12 \\x00", "x", base256=False)
    (420, 10)
    >>> _number(bytes([0x80]) + (8 << 30).to_bytes(11, "big"), "size", base256=True)
    8589934592
    """
    if field[:1] in (b"\x80", b"\xff"):
        if not base256:
            raise TarFormatError(f"the header's {what} is not an octal number")
        value = int.from_bytes(field[1:], "big")
        if field[0] == 0xFF:
            value -= 256 ** (len(field) - 1)
            if not signed:
                raise TarFormatError(f"the header's {what} is negative")
        if abs(value) > MAX_SIZE:
            raise TarFormatError(f"the header's {what} is out of range")
        return value
    digits = field.strip(b" \x00")
    if not _OCTAL_DIGITS.issuperset(digits):
        raise TarFormatError(f"the header's {what} is not an octal number")
    return int(digits, 8) if digits else 0


def _field_text(field: bytes, what: str) -> str:
    """A NUL-terminated text field as strict UTF-8."""
    end = field.find(b"\x00")
    raw = field if end < 0 else field[:end]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TarFormatError(f"a member's {what} is not UTF-8") from None


def _pax_records(data: bytes) -> dict[str, str]:
    """The records of a pax header: ``"%d %s=%s\\n"``, the length counting the whole record,
    keyword and value UTF-8; the records fill the data exactly.

    >>> _pax_records(b"12 path=a/b\\n15 SERVICE.x=1\\n")
    {'path': 'a/b', 'SERVICE.x': '1'}
    """
    records: dict[str, str] = {}
    position = 0
    while position < len(data):
        space = data.find(b" ", position, position + 8)
        digits = data[position:space] if space > position else b""
        if not digits.isdigit():  # bytes: ASCII digits only
            raise TarFormatError("a pax record's length is not a decimal number")
        end = position + int(digits)
        if end > len(data) or end < space + 4 or data[end - 1] != 0x0A:
            raise TarFormatError("a pax record's length does not fit its header")
        keyword, equals, value = data[space + 1 : end - 1].partition(b"=")
        if not equals or not keyword or b"\x00" in keyword:
            raise TarFormatError("a pax record has no keyword")
        try:
            records[keyword.decode("utf-8")] = value.decode("utf-8")
        except UnicodeDecodeError:
            raise TarFormatError("a pax record is not UTF-8") from None
        position = end
    return records


def _check_pax_numbers(records: Mapping[str, str]) -> None:
    for keyword, pattern in _PAX_NUMBERS.items():
        value = records.get(keyword)
        if value is not None and pattern.fullmatch(value) is None:
            raise TarFormatError(
                f"the pax {keyword} record must be 1 to {MAX_DECIMAL_DIGITS} ASCII digits"
            )
    for keyword in _PAX_TIMES:
        value = records.get(keyword)
        if value is not None and _PAX_TIME.fullmatch(value) is None:
            raise TarFormatError(f"the pax {keyword} record is not a decimal time")
