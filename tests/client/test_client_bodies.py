"""What the drivers hand httpx for each kind of upload body: streamed, sized, replayable."""

from __future__ import annotations

import asyncio
import io
import os
import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest

from service.client._async_io import async_content
from service.client._payload import CHUNK_BYTES, RegionBody, body_from, is_replayable
from service.client._sync_io import sync_content


def drain(content: object) -> bytes:
    if isinstance(content, bytes):
        return content
    assert isinstance(content, Iterator)
    return b"".join(content)


def adrain(body: object) -> tuple[bytes, dict[str, str]]:
    async def run() -> tuple[bytes, dict[str, str]]:
        content, headers = await async_content(body_from(body))
        if isinstance(content, bytes):
            return content, headers
        assert isinstance(content, AsyncIterator)
        return b"".join([chunk async for chunk in content]), headers

    return asyncio.run(run())


@pytest.fixture
def big_file(tmp_path: pathlib.Path) -> tuple[pathlib.Path, bytes]:
    data = os.urandom(CHUNK_BYTES * 2 + 123)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    return path, data


def test_a_path_streams_in_chunks_with_a_content_length(
    big_file: tuple[pathlib.Path, bytes],
) -> None:
    path, data = big_file
    content, headers = sync_content(body_from(path))
    assert headers == {"Content-Length": str(len(data))}
    chunks = list(content)  # type: ignore[arg-type]
    assert max(len(chunk) for chunk in chunks) <= CHUNK_BYTES
    assert b"".join(chunks) == data
    assert adrain(path) == (data, headers)


def test_a_seekable_file_is_sized_from_its_position_and_can_be_sent_again() -> None:
    file = io.BytesIO(b"skip:payload")
    file.seek(5)
    body = body_from(file)
    assert is_replayable(body)
    for _ in range(2):  # a retry re-reads from the same start
        content, headers = sync_content(body)
        assert headers == {"Content-Length": "7"}
        assert drain(content) == b"payload"
    file.seek(5)
    assert adrain(file) == (b"payload", {"Content-Length": "7"})


def test_a_pipe_is_streamed_chunked_and_cannot_be_replayed() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"from a pipe")
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        body = body_from(pipe)
        assert not is_replayable(body)
        content, headers = sync_content(body)
        assert headers == {}
        assert drain(content) == b"from a pipe"


def test_an_iterable_is_streamed_chunked_and_must_yield_bytes() -> None:
    content, headers = sync_content(body_from(iter([b"a", bytearray(b"b"), memoryview(b"c")])))
    assert headers == {} and drain(content) == b"abc"
    content, _ = sync_content(body_from(iter(["text"])))
    with pytest.raises(TypeError):
        drain(content)
    assert adrain([b"x", b"y"]) == (b"xy", {})


def test_an_async_iterable_needs_the_async_client() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"a"
        yield b"b"

    with pytest.raises(TypeError, match="AsyncServiceClient"):
        sync_content(body_from(chunks()))
    assert adrain(chunks()) == (b"ab", {})


def test_a_file_region_sends_exactly_its_bytes(big_file: tuple[pathlib.Path, bytes]) -> None:
    path, data = big_file
    fd = os.open(path, os.O_RDONLY)
    try:
        body = RegionBody(fd, 10, CHUNK_BYTES + 5)
        content, headers = sync_content(body)
        assert headers == {"Content-Length": str(CHUNK_BYTES + 5)}
        assert drain(content) == data[10 : 10 + CHUNK_BYTES + 5]
    finally:
        os.close(fd)


def test_a_file_that_shrinks_while_sent_is_an_error_not_a_short_upload(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "shrinking"
    path.write_bytes(b"x" * 100)
    content, headers = sync_content(body_from(path))
    assert headers == {"Content-Length": "100"}
    path.write_bytes(b"x" * 10)
    with pytest.raises(OSError, match="shrank"):
        drain(content)


def test_small_bytes_are_handed_over_without_a_copy() -> None:
    data = b"z" * 1000
    content, headers = sync_content(body_from(data))
    assert content is data and headers == {}


def test_large_bytes_are_sent_as_sized_chunks_that_hold_nothing_once_sent() -> None:
    data = os.urandom(CHUNK_BYTES * 3 + 1)
    content, headers = sync_content(body_from(data))
    assert headers == {"Content-Length": str(len(data))}
    assert isinstance(content, Iterator)
    chunks = list(content)
    assert len(chunks) == 4 and b"".join(chunks) == data
    assert adrain(data) == (data, headers)
