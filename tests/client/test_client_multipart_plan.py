"""Splitting sources into parts, resuming an upload, and aborting it on failure (no network)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import os
import pathlib
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.client import BadRequestError, ConnectionFailedError, ServiceError
from service.client import _ops_multipart as multipart
from service.client._flow import Call, Reply
from service.client._parts import (
    AsyncIterSource,
    IterSource,
    MemorySource,
    Piece,
    ProgressMeter,
    ReaderSource,
    Rechunker,
    RegionSource,
    choose_part_size,
    is_already_stored,
    open_source,
    split,
)
from service.client._payload import MemoryBody, RegionBody, read_region
from tests.client.flowkit import ScriptedDriver, reply

T0 = "2026-11-22T08:41:44.123Z"


def piece_bytes(piece: Piece) -> bytes:
    if isinstance(piece.body, RegionBody):
        return read_region(piece.body.fd, piece.body.offset, piece.body.length)
    return piece.body.data


@given(total=st.integers(0, 10_000), part_size=st.integers(1, 3000))
def test_split_covers_every_byte_once_in_order(total: int, part_size: int) -> None:
    spans = split(total, part_size)
    assert spans[0][0] == 0
    assert sum(length for _, length in spans) == total
    for (offset, length), (next_offset, _) in itertools.pairwise(spans):
        assert next_offset == offset + length and length == part_size
    assert 0 <= spans[-1][1] <= part_size


@given(
    chunks=st.lists(st.binary(max_size=50), max_size=30),
    part_size=st.integers(1, 40),
)
def test_rechunking_keeps_the_bytes_and_makes_exact_parts(
    chunks: list[bytes], part_size: int
) -> None:
    pieces = list(IterSource(chunks).pieces(part_size))
    assert b"".join(p.body.data for p in pieces if isinstance(p.body, MemoryBody)) == b"".join(
        chunks
    )
    assert [p.number for p in pieces] == list(range(1, len(pieces) + 1))
    assert all(p.size == part_size for p in pieces[:-1])
    assert 0 <= pieces[-1].size <= part_size
    assert len(pieces) == max(1, -(-sum(map(len, chunks)) // part_size))


def test_rechunker_never_holds_more_than_a_part_and_a_chunk() -> None:
    cutter = Rechunker(10)
    for _ in range(100):
        cutter.feed(b"x" * 7)
        assert len(cutter.buffer) < 10


def test_a_path_is_split_by_offset_without_reading_it(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "data.bin"
    data = os.urandom(10_000)
    path.write_bytes(data)
    source = open_source(str(path))
    try:
        assert isinstance(source, RegionSource) and source.size == 10_000
        pieces = list(source.pieces(3000))
        assert [(p.number, p.size) for p in pieces] == [(1, 3000), (2, 3000), (3, 3000), (4, 1000)]
        assert all(isinstance(p.body, RegionBody) for p in pieces)
        assert b"".join(piece_bytes(p) for p in pieces) == data
        assert pieces[1].sha256() == hashlib.sha256(data[3000:6000]).hexdigest()
    finally:
        source.close()
    with pytest.raises(OSError):
        os.fstat(source.fd)


def test_an_open_file_is_split_from_its_position_and_left_open(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"HEADER" + b"a" * 10)
    with path.open("rb") as file:
        file.seek(6)
        source = open_source(file)
        assert isinstance(source, RegionSource) and source.size == 10
        assert b"".join(piece_bytes(p) for p in source.pieces(4)) == b"a" * 10
        source.close()
        assert not file.closed and file.read() == b"a" * 10


def test_a_file_object_without_a_descriptor_is_read_in_order() -> None:
    source = open_source(io.BytesIO(b"abcdefghij"))
    assert isinstance(source, ReaderSource) and source.size is None
    assert [piece_bytes(p) for p in source.pieces(4)] == [b"abcd", b"efgh", b"ij"]


def test_bytes_are_sliced_and_strings_are_paths(tmp_path: pathlib.Path) -> None:
    source = open_source(b"abcdef")
    assert isinstance(source, MemorySource)
    assert [piece_bytes(p) for p in source.pieces(4)] == [b"abcd", b"ef"]
    with pytest.raises(FileNotFoundError):
        open_source(str(tmp_path / "missing"))
    with pytest.raises(TypeError):
        open_source(io.StringIO("text"))
    with pytest.raises(TypeError):
        open_source(3.14)


def test_an_async_iterable_is_cut_like_a_plain_one() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in (b"abc", b"defgh", b"", b"ij"):
            yield chunk

    async def collect() -> list[bytes]:
        source = open_source(chunks())
        assert isinstance(source, AsyncIterSource)
        return [piece_bytes(p) async for p in source.pieces(4)]

    assert asyncio.run(collect()) == [b"abcd", b"efgh", b"ij"]


def test_empty_sources_are_one_empty_part() -> None:
    assert [p.size for p in IterSource([]).pieces(4)] == [0]
    assert [p.size for p in MemorySource(b"").pieces(4)] == [0]


def test_part_size_grows_to_fit_ten_thousand_parts() -> None:
    assert choose_part_size(None, 8 << 20, 1 << 30) == 8 << 20
    assert choose_part_size(1024, 8 << 20, None) == 1024
    assert choose_part_size(1, 8, 100_001) == 11
    with pytest.raises(ValueError):
        choose_part_size(0, 8, 10)


def test_a_stream_longer_than_ten_thousand_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="part_size"):
        list(IterSource([b"x" * 10_001]).pieces(1))


def test_only_a_stored_part_with_the_same_size_and_sha256_is_skipped() -> None:
    from service.client import Part

    sha = "ab" * 32
    assert is_already_stored(Part(1, sha, 10), 10, sha)
    assert not is_already_stored(Part(1, sha, 10), 9, sha)
    assert not is_already_stored(Part(1, "cd" * 32, 10), 10, sha)
    assert not is_already_stored(None, 10, sha)


def test_progress_is_reported_cumulatively() -> None:
    seen: list[tuple[int, int | None]] = []
    meter = ProgressMeter(lambda done, total: seen.append((done, total)), 10)
    meter.advance(4)
    meter.advance(6)
    assert seen == [(4, 10), (10, 10)]


class FakeServer:
    """Answers the multipart endpoints the way the contract says, in memory, so the upload
    flow's decisions (which parts to send, complete, abort) can be checked."""

    def __init__(self, stored: dict[int, bytes] | None = None, part_size: int = 4) -> None:
        self.parts = {n: data for n, data in (stored or {}).items()}
        self.part_size = part_size
        self.aborted = False
        self.completed: list[dict[str, object]] | None = None
        self.sent_parts: list[int] = []
        self.fail_part: int | None = None

    def session(self, with_parts: bool) -> dict[str, object]:
        document: dict[str, object] = {
            "upload_id": "up_1",
            "bucket": "b",
            "key": "big",
            "recommended_part_size": self.part_size,
            "max_parallel_parts": 2,
            "expires_at": T0,
            "created_at": T0,
        }
        if with_parts:
            document["parts"] = [self.part_json(n) for n in sorted(self.parts)]
        return document

    def part_json(self, number: int) -> dict[str, object]:
        data = self.parts[number]
        return {
            "part_number": number,
            "etag": hashlib.sha256(data).hexdigest(),
            "size_bytes": len(data),
        }

    def __call__(self, call: Call) -> Reply | BaseException:
        if call.path.endswith("/multipart/init"):
            return reply(201, self.session(False))
        if call.method == "GET":
            return reply(200, self.session(True))
        if call.method == "DELETE":
            self.aborted = True
            return reply(204)
        if call.path.endswith("/part"):
            number = int(call.params["partNumber"])
            if number == self.fail_part:
                return BadRequestError("no", status=400, code="InvalidPart")
            assert call.body is not None
            if isinstance(call.body, RegionBody):
                data = read_region(call.body.fd, call.body.offset, call.body.length)
            else:
                assert isinstance(call.body, MemoryBody)
                data = call.body.data
            self.sent_parts.append(number)
            self.parts[number] = data
            return reply(200, self.part_json(number))
        assert call.path.endswith("/complete")
        self.completed = call.json["parts"]
        whole = b"".join(self.parts[p["part_number"]] for p in call.json["parts"])
        sha = hashlib.sha256(whole).hexdigest()
        return reply(
            200,
            {
                "bucket": "b",
                "key": "big",
                "size_bytes": len(whole),
                "content_type": "application/octet-stream",
                "etag": sha,
                "sha256_checksum": sha,
                "version_id": None,
                "custom_metadata": {},
                "created_at": T0,
                "updated_at": T0,
            },
        )


def test_a_fresh_upload_sends_every_part_and_completes_in_order(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "src"
    path.write_bytes(b"0123456789")
    server = FakeServer()
    progress: list[tuple[int, int | None]] = []
    obj = ScriptedDriver(server).run(
        multipart.upload_multipart(
            "b", "big", str(path), progress=lambda done, total: progress.append((done, total))
        )
    )
    assert server.sent_parts == [1, 2, 3]
    assert [p["part_number"] for p in server.completed or []] == [1, 2, 3]
    assert obj.sha256_checksum == hashlib.sha256(b"0123456789").hexdigest()
    assert progress == [(4, 10), (8, 10), (10, 10)]


def test_a_resumed_upload_skips_parts_already_stored_with_the_same_bytes(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "src"
    path.write_bytes(b"0123456789")
    # part 1 stored intact, part 2 stored with other bytes, part 3 missing
    server = FakeServer(stored={1: b"0123", 2: b"XXXX"})
    progress: list[int] = []
    obj = ScriptedDriver(server).run(
        multipart.upload_multipart(
            "b", "big", path, upload_id="up_1", progress=lambda done, _: progress.append(done)
        )
    )
    assert server.sent_parts == [2, 3]
    assert obj.size_bytes == 10
    assert obj.sha256_checksum == hashlib.sha256(b"0123456789").hexdigest()
    assert progress[-1] == 10


def test_resuming_an_upload_of_another_key_is_refused() -> None:
    server = FakeServer()
    with pytest.raises(ValueError, match="big"):
        ScriptedDriver(server).run(
            multipart.upload_multipart("b", "other", b"data", upload_id="up_1")
        )


def test_an_unrecoverable_part_error_aborts_the_session() -> None:
    server = FakeServer()
    server.fail_part = 2
    with pytest.raises(BadRequestError) as raised:
        ScriptedDriver(server).run(multipart.upload_multipart("b", "big", b"0123456789"))
    assert server.aborted and server.completed is None
    assert raised.value.upload_id is None


def test_keep_on_error_leaves_the_session_for_a_resume_and_names_it() -> None:
    server = FakeServer()
    server.fail_part = 3
    with pytest.raises(BadRequestError) as raised:
        ScriptedDriver(server).run(
            multipart.upload_multipart("b", "big", iter([b"0123456789"]), keep_on_error=True)
        )
    assert not server.aborted
    assert raised.value.upload_id == "up_1"
    assert any("upload_id='up_1'" in note for note in raised.value.__notes__)


def test_a_failed_abort_is_noted_but_the_original_error_wins() -> None:
    server = FakeServer()
    server.fail_part = 1

    def respond(call: Call) -> Reply | BaseException:
        if call.method == "DELETE":
            return ConnectionFailedError("server gone")
        return server(call)

    with pytest.raises(BadRequestError) as raised:
        ScriptedDriver(respond).run(multipart.upload_multipart("b", "big", b"0123"))
    assert any("server gone" in note for note in raised.value.__notes__)


def test_a_source_that_fails_to_read_aborts_and_surfaces_its_error() -> None:
    def broken() -> object:
        yield b"0123"
        raise OSError("disk on fire")

    server = FakeServer()
    with pytest.raises(OSError, match="disk on fire"):
        ScriptedDriver(server).run(multipart.upload_multipart("b", "big", broken()))
    assert server.aborted


def test_the_error_type_of_a_kept_session_is_unchanged() -> None:
    server = FakeServer()
    server.fail_part = 1
    with pytest.raises(ServiceError):
        ScriptedDriver(server).run(
            multipart.upload_multipart("b", "big", b"0123", keep_on_error=True)
        )
