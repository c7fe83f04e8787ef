"""Object downloads: what the sync and async stream handles share.

``get`` and ``get_range`` return the handle as soon as the headers arrived; the body is read
only through the handle, a chunk at a time, so memory does not depend on the object's size.
When a whole object (status 200) has been read, its SHA-256 is checked against the one the
server announced in ``X-Checksum-Sha256`` and a mismatch raises ``IntegrityError``;
``write_to_file`` writes to a temporary file beside the target and renames it only after that
check, so a damaged download never takes the target's name.

The handles themselves are ``_async_stream.AsyncObjectStream`` (the source) and
``_stream.ObjectStream`` (generated from it by ``scripts/unasync.py``).

Thread-safety: a handle belongs to one thread (or task) at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import httpx

from service.client._exceptions import IntegrityError
from service.client._flow import Reply
from service.client._headers import ObjectHeaders
from service.client._wire import HEADER_REQUEST_ID

__all__ = ["Handle", "Verifier", "remove_quietly"]


class Verifier:
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


class Handle:
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

    def _start(self) -> Verifier:
        if self._started:
            raise RuntimeError("the body was already read (or is being read); get it again")
        self._started = True
        return Verifier(self.status, self.metadata)

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


def remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
