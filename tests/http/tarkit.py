"""Tar archives written byte by byte, for shapes no well-behaved writer makes.

Python's ``tarfile`` cannot write a GNU sparse member, a pax ``size`` of thirty digits, a
name that is not UTF-8 or a header with a damaged number, and an attacker writes exactly
those. ``header`` lays out one 512-byte header field by field (POSIX ustar, with the GNU
variant's magic and its sparse area) with a correct checksum unless told otherwise; the
other helpers build members, pax records and whole archives from it. ``ATTACKS`` names every
hostile shape the batch reader is tested against (over HTTP, in its unit tests and as the
fuzz target's seed corpus), each with what the server must answer.

Pure functions; no I/O but ``write_corpus``.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

BLOCK = 512
BOMB_BYTES = 64 * 1024 * 1024
"""What the sparse bombs expand to (issue 23 used 1 GiB; the ratio is the point)."""
USTAR = b"ustar\x0000"
GNU = b"ustar  \x00"
V7 = bytes(8)
END = bytes(2 * BLOCK)


def octal(value: int, width: int) -> bytes:
    """``value`` as ``width - 1`` octal digits and a NUL, as ustar writes numbers."""
    return b"%0*o\x00" % (width - 1, value)


def base256(value: int, width: int) -> bytes:
    """``value`` in GNU's base-256 form: a leading 0x80 (0xff when negative), big-endian."""
    if value >= 0:
        return bytes([0x80]) + value.to_bytes(width - 1, "big")
    return (value % (1 << (8 * width))).to_bytes(width, "big")


def pad(data: bytes) -> bytes:
    """``data`` padded with NULs to a whole number of blocks."""
    return data + bytes(-len(data) % BLOCK)


def header(
    name: bytes | str,
    *,
    size: int | bytes = 0,
    typeflag: bytes = b"0",
    magic: bytes = USTAR,
    prefix: bytes = b"",
    linkname: bytes = b"",
    mode: bytes | None = None,
    mtime: bytes | None = None,
    raw: dict[int, bytes] | None = None,
    checksum: bytes | None = None,
) -> bytes:
    """One header block. Numbers given as bytes are written as they are (a damaged field);
    ``raw`` places bytes at offsets (the GNU sparse area); ``checksum`` replaces the
    computed checksum field."""
    block = bytearray(BLOCK)

    def put(offset: int, value: bytes, width: int) -> None:
        assert len(value) <= width, (offset, value)
        block[offset : offset + len(value)] = value

    put(0, name.encode() if isinstance(name, str) else name, 100)
    put(100, mode if mode is not None else octal(0o644, 8), 8)
    put(108, octal(1000, 8), 8)
    put(116, octal(1000, 8), 8)
    put(124, size if isinstance(size, bytes) else octal(size, 12), 12)
    put(136, mtime if mtime is not None else octal(1_700_000_000, 12), 12)
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    put(157, linkname, 100)
    put(257, magic, 8)
    if magic != V7:
        put(265, b"user", 32)
        put(297, b"group", 32)
        put(329, octal(0, 8), 8)
        put(337, octal(0, 8), 8)
    if prefix:
        put(345, prefix, 155)
    for offset, value in (raw or {}).items():
        block[offset : offset + len(value)] = value
    block[148:156] = checksum if checksum is not None else b"%06o\x00 " % sum(block)
    assert len(block) == BLOCK
    return bytes(block)


def member(name: bytes | str, data: bytes = b"", **fields: object) -> bytes:
    """A member: its header (size from ``data`` unless given) and its data, padded."""
    fields.setdefault("size", len(data))
    return header(name, **fields) + pad(data)  # type: ignore[arg-type]


def pax_record(keyword: bytes | str, value: bytes | str) -> bytes:
    """One ``"%d %s=%s\\n"`` record whose length counts itself."""
    key = keyword.encode() if isinstance(keyword, str) else keyword
    val = value.encode() if isinstance(value, str) else value
    body = b" " + key + b"=" + val + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def pax(records: dict[str, str | bytes] | bytes, typeflag: bytes = b"x") -> bytes:
    """A pax extended (``x``) or global (``g``) header with its records."""
    data = (
        records
        if isinstance(records, bytes)
        else b"".join(pax_record(k, v) for k, v in records.items())
    )
    return member(b"././@PaxHeader", data, typeflag=typeflag)


def gnu_long_name(name: bytes, typeflag: bytes = b"L") -> bytes:
    """A GNU long-name (``L``) or long-link (``K``) header carrying ``name``."""
    return member(b"././@LongLink", name + b"\x00", typeflag=typeflag, magic=GNU)


def gnu_sparse(
    name: str,
    realsize: int,
    stored: bytes,
    *,
    sparse_map: list[tuple[bytes, bytes]] | None = None,
    extension_blocks: list[bytes] = (),  # type: ignore[assignment]
) -> bytes:
    """An old-GNU sparse member (type ``S``): up to four map entries in the header, more in
    ``extension_blocks`` (each 512 bytes, chained by the ``isextended`` byte), then the
    ``stored`` bytes. Expanded, it is ``realsize`` bytes: the bomb of issue 23."""
    entries = sparse_map or [(octal(realsize - len(stored), 12), octal(len(stored), 12))]
    raw = {}
    for index, (offset, numbytes) in enumerate(entries[:4]):
        raw[386 + 24 * index] = offset
        raw[386 + 24 * index + 12] = numbytes
    raw[482] = b"\x01" if extension_blocks else b"\x00"
    raw[483] = octal(realsize, 12)
    blocks = b""
    for number, block in enumerate(extension_blocks):
        chained = bytearray(pad(block)[:BLOCK])
        chained[504] = 1 if number + 1 < len(extension_blocks) else 0
        blocks += bytes(chained)
    head = header(name, size=len(stored), typeflag=b"S", magic=GNU, raw=raw)
    return head + blocks + pad(stored)


@dataclass(frozen=True)
class Attack:
    """A hostile archive and the server's answer to it: ``whole`` = the error code of a
    400 for the whole body (nothing stored), else ``members`` = per member in order, the
    code it is refused with or None when it is stored."""

    body: bytes
    whole: str | None = None
    members: tuple[tuple[str, str | None], ...] = ()
    message: str = ""
    """A fragment the 400's message holds."""


AFTER = member("after.txt", b"stored after the refused member")
STORED_AFTER = ("after.txt", None)


def _sparse_10() -> bytes:
    records = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "real-name",
        "GNU.sparse.realsize": str(1 << 30),
    }
    return pax(records) + member("GNUSparseFile.0/real-name", pad(b"1\nx\n") + b"data")


ATTACKS: dict[str, Attack] = {
    "gnu_sparse_bomb": Attack(
        gnu_sparse("bomb", BOMB_BYTES, b"b" * 512) + AFTER + END,
        members=(("bomb", "InvalidArgument"), STORED_AFTER),
    ),
    "gnu_sparse_extended_bad_map": Attack(
        gnu_sparse(
            "bomb",
            BOMB_BYTES,
            b"s" * 700,
            sparse_map=[(b"zz", b"-1")] * 4,
            extension_blocks=[b"\xff" * 504, b"not octal" * 56],
        )
        + AFTER
        + END,
        members=(("bomb", "InvalidArgument"), STORED_AFTER),
    ),
    "pax_sparse_00": Attack(
        pax(
            {
                "GNU.sparse.size": str(BOMB_BYTES),
                "GNU.sparse.numblocks": "1",
                "GNU.sparse.offset": "0",
                "GNU.sparse.numbytes": "4",
            }
        )
        + member("sparse-00", b"data")
        + AFTER
        + END,
        members=(("sparse-00", "InvalidArgument"), STORED_AFTER),
    ),
    "pax_sparse_01_bad_map": Attack(
        pax({"GNU.sparse.size": "99", "GNU.sparse.numblocks": "1", "GNU.sparse.map": "0,x"})
        + member("sparse-01", b"data")
        + AFTER
        + END,
        members=(("sparse-01", "InvalidArgument"), STORED_AFTER),
    ),
    "pax_sparse_10_bad_map": Attack(
        _sparse_10() + AFTER + END,
        members=(("real-name", "InvalidArgument"), STORED_AFTER),
    ),
    "pax_size_thirty_digits": Attack(
        pax({"size": "9" * 30}) + member("huge", b"x" * 3000) + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_size_negative": Attack(
        pax({"size": "-1"}) + member("negative", b"x") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_size_arabic_indic_digits": Attack(
        pax({"size": "\u0663"}) + member("arabic", b"abc") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_size_fullwidth_digits": Attack(
        pax({"size": "\uff13"}) + member("fullwidth", b"abc") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_size_nineteen_digits": Attack(
        pax({"size": "1" + "0" * 18}) + member("nineteen", b"x") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_size_signed": Attack(
        pax({"size": "+3"}) + member("signed", b"abc") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "pax_mtime_other_digits": Attack(
        pax({"mtime": "\u0661\u0662"}) + member("mtime", b"abc") + END,
        whole="InvalidArgument",
        message="mtime",
    ),
    "name_not_utf8": Attack(
        member(b"bad-\xff\xfe-name", b"x") + END, whole="InvalidArgument", message="UTF-8"
    ),
    "ustar_prefix_not_utf8": Attack(
        member("name", b"x", prefix=b"dir-\xc3") + END, whole="InvalidArgument", message="UTF-8"
    ),
    "pax_path_not_utf8": Attack(
        pax({"path": b"pax-\xff"}) + member("ignored", b"x") + END,
        whole="InvalidArgument",
        message="UTF-8",
    ),
    "pax_hdrcharset_binary_path": Attack(
        pax({"hdrcharset": "BINARY", "path": b"bin-\xe9"}) + member("ignored", b"x") + END,
        whole="InvalidArgument",
        message="UTF-8",
    ),
    "gnu_long_name_not_utf8": Attack(
        gnu_long_name(b"long-\xc0\xaf") + member("short", b"x", magic=GNU) + END,
        whole="InvalidArgument",
        message="UTF-8",
    ),
    "base256_negative_size": Attack(
        member("neg", b"", size=base256(-512, 12), magic=GNU) + END,
        whole="InvalidArgument",
        message="size",
    ),
    "octal_size_garbage": Attack(
        member("garbage", b"", size=b"0000000001x\x00") + END,
        whole="InvalidArgument",
        message="size",
    ),
    "octal_mode_other_digits": Attack(
        member("mode", b"x", mode="000\u0666".encode() + b"\x00") + END,
        whole="InvalidArgument",
        message="mode",
    ),
    "bad_checksum": Attack(
        header("sum", size=1, checksum=b"0000000\x00") + pad(b"x") + END,
        whole="InvalidArgument",
        message="checksum",
    ),
    "truncated_header": Attack(
        member("whole", b"x") + header("cut", size=1)[:300], whole="InvalidArgument"
    ),
    "truncated_in_data": Attack(header("cut", size=2000) + b"y" * 700, whole="InvalidArgument"),
    "no_end_of_archive": Attack(member("a", b"x") + member("b", b"y"), whole="InvalidArgument"),
    "extended_header_then_end": Attack(pax({"path": "orphan"}) + END, whole="InvalidArgument"),
    "long_name_then_end": Attack(gnu_long_name(b"orphan") + END, whole="InvalidArgument"),
    "pax_chain": Attack(
        pax({"comment": "x"}) * 2000 + member("chained", b"x") + END, whole="InvalidArgument"
    ),
    "pax_record_length_past_end": Attack(
        pax(b"99 path=a\n") + member("x", b"x") + END, whole="InvalidArgument"
    ),
    "pax_record_length_zero": Attack(
        pax(b"0 path=a\n") + member("x", b"x") + END, whole="InvalidArgument"
    ),
    "pax_record_no_equals": Attack(
        pax(b"11 pathxab\n") + member("x", b"x") + END, whole="InvalidArgument"
    ),
    "pax_record_length_other_digits": Attack(
        pax("\u0661\u0660 path=a\n".encode()) + member("x", b"x") + END,
        whole="InvalidArgument",
    ),
    "extended_header_over_64_kib": Attack(
        pax({"comment": "c" * (65 * 1024)}) + member("x", b"x") + END,
        whole="InvalidArgument",
        message="extended header",
    ),
    "unknown_type": Attack(
        member("unknown", b"q" * 600, typeflag=b"Q") + AFTER + END,
        members=(("unknown", "InvalidArgument"), STORED_AFTER),
    ),
    "multi_volume_continuation": Attack(
        member("volume-part", b"m" * 100, typeflag=b"M", magic=GNU) + AFTER + END,
        members=(("volume-part", "InvalidArgument"), STORED_AFTER),
    ),
    "hard_link_declaring_data": Attack(
        member("hard", b"", size=4096, typeflag=b"1", linkname=b"after.txt") + AFTER + END,
        members=(("hard", "InvalidArgument"), STORED_AFTER),
    ),
    "fifo_and_devices": Attack(
        member("fifo", typeflag=b"6")
        + member("char", typeflag=b"3")
        + member("block", typeflag=b"4")
        + member("symlink", typeflag=b"2", linkname=b"/etc/passwd")
        + AFTER
        + END,
        members=(
            ("fifo", "InvalidArgument"),
            ("char", "InvalidArgument"),
            ("block", "InvalidArgument"),
            ("symlink", "InvalidArgument"),
            STORED_AFTER,
        ),
    ),
}


CORPUS_DIR = Path(__file__).resolve().parents[2] / "fuzz" / "corpus" / "batch_reader"
"""The fuzz target's committed seeds (``fuzz/fuzz_batch_reader.py``)."""
CORPUS_MAX_BYTES = 128 * 1024
PIECE_SELECTOR = b"\x05"
"""The fuzz target reads its first byte as the feeding size (5: 4096-byte pieces)."""


def _written_by_tarfile(fmt: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|", format=fmt) as archive:
        for name, data in [
            ("a.txt", b"alpha"),
            ("dir/" + "n" * 120, b"long"),
            ("d\u00e9j\u00e0", b""),
        ]:
            if fmt == tarfile.USTAR_FORMAT:
                name = name[:100]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if fmt == tarfile.PAX_FORMAT:
                info.pax_headers = {"SERVICE.meta.k": "v", "SERVICE.content_type": "text/plain"}
            archive.addfile(info, io.BytesIO(data))
        directory = tarfile.TarInfo("dir")
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
    return buffer.getvalue()


def corpus() -> dict[str, bytes]:
    """Every seed of the fuzz target, by file name: the attack shapes that fit
    ``CORPUS_MAX_BYTES``, a short chain of extended headers, and what ``tarfile`` writes in
    each format."""
    seeds = {
        f"{name}.tar": PIECE_SELECTOR + attack.body
        for name, attack in ATTACKS.items()
        if len(attack.body) < CORPUS_MAX_BYTES
    }
    seeds["pax_chain_short.tar"] = PIECE_SELECTOR + pax({"a": "1"}) * 3 + member("x", b"x") + END
    for label, fmt in (
        ("ustar", tarfile.USTAR_FORMAT),
        ("gnu", tarfile.GNU_FORMAT),
        ("pax", tarfile.PAX_FORMAT),
    ):
        seeds[f"valid_{label}.tar"] = PIECE_SELECTOR + _written_by_tarfile(fmt)
    return seeds


def write_corpus() -> None:
    """Rewrite ``CORPUS_DIR`` from ``corpus()`` (after changing ``ATTACKS``)::

    python -c "from tests.http.tarkit import write_corpus; write_corpus()"
    """
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    for stale in CORPUS_DIR.glob("*.tar"):
        stale.unlink()
    for name, data in corpus().items():
        (CORPUS_DIR / name).write_bytes(data)
