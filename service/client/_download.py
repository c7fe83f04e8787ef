"""Object downloads: a handle on a streamed GET answer, in sync and async flavours.

``get`` and ``get_range`` return the handle as soon as the headers arrived; the body is read
only through the handle, a chunk at a time, so memory does not depend on the object's size.
When a whole object (status 200) has been read, its SHA-256 is checked against the one the
server announced in ``X-Checksum-Sha256`` and a mismatch raises ``IntegrityError``;
``write_to_file`` writes to a temporary file beside the target and renames it only after that
check, so a damaged download never takes the target's name.

Thread-safety: a handle belongs to one thread (or task) at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import IO, Any

import httpx

from service.client._async_io import off_loop
from service.client._exceptions import IntegrityError, transport_error
from service.client._flow import Reply
from service.client._headers import ObjectHeaders
from service.client._wire import HEADER_REQUEST_ID

__all__ = ["AsyncObjectStream", "ObjectStream"]


class _Verifier:
    """Hashes a whole-object body as it passes and compares at the end; partial (206) bodies
    and answers without a checksum header pass unchecked."""

    def __init__(self, status: int, metadata: ObjectHeaders) -> None:
        self.expected = metadata.sha256.lower() if status == 200 and metadata.sha256 else None
        self.digest = hashlib.sha256() if self.expected else None

    def update(self, chunk: bytes) -> None:
        if self.digest is not None:
            self.digest.update(chunk)

    def finish(self, request_id: str | None) -> None:
        if self.digest is None:
            return
        actual = self.digest.hexdigest()
        if actual != self.expected:
            raise IntegrityError(
                f"downloaded bytes have SHA-256 {actual}, the server announced {self.expected}",
                request_id=request_id,
            )


class _Handle:
    """What both flavours share: the parsed answer and the read-once bookkeeping."""

    def __init__(self, bucket: str, key: str, reply: Reply) -> None:
        assert reply.raw is not None
        self.bucket = bucket
        self.key = key
        self.status = reply.status
        self.metadata = ObjectHeaders.from_headers(reply.headers)
        self.request_id = reply.headers.get(HEADER_REQUEST_ID)
        self._response: httpx.Response = reply.raw
        self._content: bytes | None = None
        self._started = False

    def _start(self) -> _Verifier:
        if self._started:
            raise RuntimeError("the body was already read (or is being read); get it again")
        self._started = True
        return _Verifier(self.status, self.metadata)

    def _charset(self) -> str:
        content_type = self.metadata.content_type or ""
        for parameter in content_type.split(";")[1:]:
            name, _, value = parameter.strip().partition("=")
            if name.lower() == "charset" and value:
                return value.strip('"')
        return "utf-8"

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.bucket}/{self.key} status={self.status} "
            f"length={self.metadata.content_length}>"
        )


class ObjectStream(_Handle):
    """A streamed object (the result of ``get``/``get_range``/``image``). Read it once,
    through one of the readers, and close it (or use ``with``) to free the connection.

    Example::

        with bucket.get("report.csv") as obj:
            print(obj.metadata.content_type, obj.metadata.size)
            obj.write_to_file("/tmp/report.csv")
    """

    def iter_bytes(self, chunk_size: int | None = None) -> Iterator[bytes]:
        """The body chunk by chunk; the SHA-256 check runs after the last chunk."""
        if self._content is not None:
            yield self._content
            return
        verifier = self._start()
        try:
            for chunk in self._response.iter_bytes(chunk_size):
                verifier.update(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        finally:
            self.close()
        verifier.finish(self.request_id)

    stream = iter_bytes

    def __iter__(self) -> Iterator[bytes]:
        return self.iter_bytes()

    def read(self) -> bytes:
        """The whole body in memory (kept, so ``text``/``json`` may follow)."""
        if self._content is None:
            self._content = b"".join(self.iter_bytes())
        return self._content

    def text(self, encoding: str | None = None) -> str:
        """The body decoded with ``encoding``, else the Content-Type charset, else UTF-8."""
        return self.read().decode(encoding or self._charset())

    def json(self) -> Any:
        return json.loads(self.read())

    def write_to_file(self, path: str | os.PathLike[str]) -> int:
        """Stream the body into ``path`` and return the byte count. The target appears only
        once every byte arrived and (for a whole object) the SHA-256 matched."""
        target = os.fspath(path)
        fd, temporary = tempfile.mkstemp(
            dir=os.path.dirname(os.path.abspath(target)), prefix=".download-", suffix=".part"
        )
        try:
            with os.fdopen(fd, "wb") as file:
                written = self.pipe_to(file)
            # rename only after the checksum passed, so a bad download never takes the name
            os.replace(temporary, target)
        except BaseException:
            _remove_quietly(temporary)
            raise
        return written

    def pipe_to(self, file: IO[bytes]) -> int:
        """Write the body to an open binary ``file`` (not closed here); return the count."""
        written = 0
        for chunk in self.iter_bytes():
            file.write(chunk)
            written += len(chunk)
        return written

    def close(self) -> None:
        """Free the connection; unread bytes are dropped."""
        self._response.close()

    def __enter__(self) -> ObjectStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncObjectStream(_Handle):
    """The async flavour of ``ObjectStream``: the same readers, awaited.

    Example::

        async with await bucket.get("report.csv") as obj:
            await obj.write_to_file("/tmp/report.csv")
    """

    async def aiter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """The body chunk by chunk; the SHA-256 check runs after the last chunk. Hashing
        runs on the executor, so the event loop never stalls on a large object."""
        if self._content is not None:
            yield self._content
            return
        verifier = self._start()
        try:
            async for chunk in self._response.aiter_bytes(chunk_size):
                if verifier.digest is not None:
                    await off_loop(verifier.update, chunk)
                yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        finally:
            await self.close()
        verifier.finish(self.request_id)

    stream = aiter_bytes

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.aiter_bytes()

    async def read(self) -> bytes:
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self._content

    async def text(self, encoding: str | None = None) -> str:
        return (await self.read()).decode(encoding or self._charset())

    async def json(self) -> Any:
        return json.loads(await self.read())

    async def write_to_file(self, path: str | os.PathLike[str]) -> int:
        """As ``ObjectStream.write_to_file``; file operations run on the executor."""
        target = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = await off_loop(
            lambda: tempfile.mkstemp(dir=directory, prefix=".download-", suffix=".part")
        )
        try:
            file = await off_loop(os.fdopen, fd, "wb")
            try:
                written = await self.pipe_to(file)
            finally:
                await off_loop(file.close)
            # rename only after the checksum passed, so a bad download never takes the name
            await off_loop(os.replace, temporary, target)
        except Exception:
            await off_loop(_remove_quietly, temporary)
            raise
        except BaseException:
            _remove_quietly(temporary)  # cancelled: nothing can be awaited any more
            raise
        return written

    async def pipe_to(self, file: Any) -> int:
        """Write the body to ``file``: a binary file object (written on the executor) or an
        object whose ``write`` is a coroutine function (awaited). Not closed here."""
        asynchronous = inspect.iscoroutinefunction(file.write)
        written = 0
        async for chunk in self.aiter_bytes():
            if asynchronous:
                await file.write(chunk)
            else:
                await off_loop(file.write, chunk)
            written += len(chunk)
        return written

    async def close(self) -> None:
        await self._response.aclose()

    aclose = close

    async def __aenter__(self) -> AsyncObjectStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
