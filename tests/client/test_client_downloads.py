"""The object handle of ``get``: streamed readers, SHA-256 verification, safe file writes.

The handle wraps an ``httpx.Response``; here the responses are built in memory (httpx's own
type, fed from an iterator) so the readers' behaviour is checked without a server.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import pathlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from service.client import AsyncObjectStream, IntegrityError, ObjectStream
from service.client._flow import Reply

DATA = b"hello, object storage! " * 1000
SHA = hashlib.sha256(DATA).hexdigest()


class CountingStream(httpx.SyncByteStream):
    """A response body that records how far it was read and whether it was closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.served = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.served += 1
            yield chunk

    def close(self) -> None:
        self.closed = True


def chunks_of(data: bytes, size: int = 4096) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def make_stream(
    data: bytes = DATA,
    *,
    status: int = 200,
    sha: str | None = SHA,
    headers: dict[str, str] | None = None,
) -> tuple[ObjectStream, CountingStream]:
    body = CountingStream(chunks_of(data))
    all_headers = {"Content-Length": str(len(data)), "Content-Type": "text/plain"}
    if sha is not None:
        all_headers["X-Checksum-Sha256"] = sha
    all_headers.update(headers or {})
    response = httpx.Response(status, headers=all_headers, stream=body)
    reply = Reply(status, response.headers, raw=response)
    return ObjectStream("b", "k", reply), body


def test_reading_is_lazy_chunk_by_chunk() -> None:
    stream, body = make_stream()
    chunks = stream.iter_bytes()
    first = next(chunks)
    assert first == DATA[:4096] and body.served == 1
    assert b"".join([first, *chunks]) == DATA and body.closed


def test_a_whole_object_with_the_announced_sha256_reads_fine() -> None:
    stream, _ = make_stream()
    assert stream.status == 200 and stream.metadata.sha256 == SHA
    assert stream.read() == DATA
    assert stream.text() == DATA.decode() and stream.read() is stream.read()


def test_a_whole_object_with_other_bytes_raises_integrity_error() -> None:
    stream, _ = make_stream(sha="0" * 64)
    with pytest.raises(IntegrityError):
        stream.read()


def test_a_partial_answer_is_not_checked_against_the_whole_objects_sha256() -> None:
    window = DATA[:100]
    stream, _ = make_stream(
        window, status=206, headers={"Content-Range": f"bytes 0-99/{len(DATA)}"}
    )
    assert stream.read() == window
    assert stream.metadata.size == len(DATA)


def test_a_body_can_only_be_streamed_once() -> None:
    stream, _ = make_stream()
    list(stream.iter_bytes())
    with pytest.raises(RuntimeError):
        list(stream.stream())


def test_write_to_file_streams_into_the_target(tmp_path: pathlib.Path) -> None:
    stream, _ = make_stream()
    target = tmp_path / "out.txt"
    assert stream.write_to_file(target) == len(DATA)
    assert target.read_bytes() == DATA
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_damaged_download_never_takes_the_target_name(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"previous good copy")
    stream, _ = make_stream(sha="0" * 64)
    with pytest.raises(IntegrityError):
        stream.write_to_file(target)
    assert target.read_bytes() == b"previous good copy"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_pipe_to_writes_into_an_open_file_and_leaves_it_open() -> None:
    stream, _ = make_stream()
    sink = io.BytesIO()
    assert stream.pipe_to(sink) == len(DATA)
    assert sink.getvalue() == DATA and not sink.closed


def test_closing_early_frees_the_response() -> None:
    stream, body = make_stream()
    with stream as handle:
        next(handle.iter_bytes())
    assert body.closed


def test_text_uses_the_declared_charset_and_json_parses() -> None:
    text = "ünïcode"
    stream, _ = make_stream(
        text.encode("latin-1"), sha=None, headers={"Content-Type": "text/plain; charset=latin-1"}
    )
    assert stream.text() == text
    stream, _ = make_stream(b'{"a": [1, 2]}', sha=None)
    assert stream.json() == {"a": [1, 2]}


def test_a_connection_lost_mid_body_is_a_transport_error() -> None:
    from service.client import TransportError

    class Broken(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b"partial"
            raise httpx.ReadError("connection reset")

    response = httpx.Response(200, headers={"X-Checksum-Sha256": SHA}, stream=Broken())
    stream = ObjectStream("b", "k", Reply(200, response.headers, raw=response))
    with pytest.raises(TransportError) as raised:
        stream.read()
    assert isinstance(raised.value.__cause__, httpx.ReadError)


class AsyncBody(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def make_async_stream(data: bytes = DATA, sha: str = SHA) -> tuple[AsyncObjectStream, AsyncBody]:
    body = AsyncBody(chunks_of(data))
    response = httpx.Response(200, headers={"X-Checksum-Sha256": sha}, stream=body)
    return AsyncObjectStream("b", "k", Reply(200, response.headers, raw=response)), body


def test_async_readers_verify_and_write_like_the_sync_ones(tmp_path: pathlib.Path) -> None:
    async def scenario() -> None:
        stream, body = make_async_stream()
        assert await stream.read() == DATA and body.closed
        stream, _ = make_async_stream()
        assert await stream.write_to_file(tmp_path / "a.txt") == len(DATA)
        stream, _ = make_async_stream(sha="1" * 64)
        with pytest.raises(IntegrityError):
            await stream.write_to_file(tmp_path / "b.txt")
        stream, _ = make_async_stream()
        sink = io.BytesIO()
        await stream.pipe_to(sink)
        assert sink.getvalue() == DATA

    asyncio.run(scenario())
    assert (tmp_path / "a.txt").read_bytes() == DATA
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
