"""``AsyncObjectStream``: a streamed object for the asyncio client.

Of the two stream modules the async one is the source: ``scripts/unasync.py`` writes the
sync one from it, so edit the async one. What both share (the parsed answer, the SHA-256
check) lives in ``_download``. In the async flavour, blocking work (hashing, file operations)
runs on the default executor, so the event loop never stalls on a large object.

Thread-safety: a handle belongs to one task at a time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import httpx

from service.client._async_concurrency import AsyncWritable, off_loop, write_chunk
from service.client._download import Handle, remove_quietly
from service.client._exceptions import transport_error

__all__ = ["AsyncObjectStream"]


class AsyncObjectStream(Handle):
    """A streamed object (the result of ``get``/``get_range``/``image``). Read it once,
    through one of the readers, and close it (or use ``async with``) to free the connection.

    Example::

        async with await bucket.get("report.csv") as obj:
            print(obj.metadata.content_type, obj.metadata.size)
            await obj.write_to_file("/tmp/report.csv")
    """

    async def aiter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """The body chunk by chunk; the SHA-256 check runs after the last chunk."""
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
        """The whole body in memory (kept, so ``text``/``json`` may follow)."""
        if self._content is None:
            chunks = []
            async for chunk in self.aiter_bytes():
                chunks.append(chunk)
            self._content = b"".join(chunks)
        return self._content

    async def text(self, encoding: str | None = None) -> str:
        """The body decoded with ``encoding``, else the Content-Type charset, else UTF-8."""
        data = await self.read()
        return data.decode(encoding or self._charset())

    async def json(self) -> Any:
        data = await self.read()
        return json.loads(data)

    async def write_to_file(self, path: str | os.PathLike[str]) -> int:
        """Stream the body into ``path`` and return the byte count. The target appears only
        once every byte arrived and (for a whole object) the SHA-256 matched."""
        target = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = await off_loop(tempfile.mkstemp, ".part", ".download-", directory)
        try:
            file = await off_loop(os.fdopen, fd, "wb")
            try:
                written = await self.pipe_to(file)
            finally:
                await off_loop(file.close)
            # rename only after the checksum passed, so a bad download never takes the name
            await off_loop(os.replace, temporary, target)
        except BaseException:
            remove_quietly(temporary)  # one unlink; also when cancelled (nothing can be awaited)
            raise
        return written

    async def pipe_to(self, file: AsyncWritable) -> int:
        """Write the body to an open binary ``file`` (not closed here); return the count."""
        written = 0
        async for chunk in self.aiter_bytes():
            await write_chunk(file, chunk)
            written += len(chunk)
        return written

    async def close(self) -> None:
        """Free the connection; unread bytes are dropped."""
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
