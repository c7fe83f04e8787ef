"""``AsyncMultipartUpload``: one multipart upload session, from
``AsyncBucketClient.create_multipart_upload``.

Like the other handles, every method builds a flow from ``_ops_multipart`` and runs it on
the ``AsyncDriver``. The async module is the source (``scripts/unasync.py`` writes the sync
one from it): edit the async one, never the copy.

Thread-safety: as the client's (see ``_async_client``); a handle holds only its session.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from service.client import _ops_multipart as multipart
from service.client._async_io import AsyncDriver, Handle
from service.client._models import Object, Part, Session
from service.client._payload import Data, body_from

__all__ = ["AsyncMultipartUpload"]


class AsyncMultipartUpload(Handle):
    """A multipart upload session, from ``AsyncBucketClient.create_multipart_upload``.

    Example::

        upload = await bucket.create_multipart_upload("big.bin")
        await upload.upload_part(1, first_chunk)
        await upload.upload_part(2, second_chunk)
        obj = await upload.complete()
    """

    def __init__(self, driver: AsyncDriver, session: Session) -> None:
        super().__init__(driver)
        self.session = session

    @property
    def upload_id(self) -> str:
        return self.session.upload_id

    @property
    def bucket(self) -> str:
        return self.session.bucket

    @property
    def key(self) -> str:
        return self.session.key

    @property
    def recommended_part_size(self) -> int:
        return self.session.recommended_part_size

    @property
    def max_parallel_parts(self) -> int:
        return self.session.max_parallel_parts

    @property
    def expires_at(self) -> datetime.datetime:
        return self.session.expires_at

    async def upload_part(
        self, part_number: int, data: Data, *, checksum: str | None = None
    ) -> Part:
        """Store part ``part_number`` (1 to 10 000); sending a number again replaces it."""
        body = body_from(data)
        return await self._run(
            multipart.upload_part(self.upload_id, part_number, body, checksum=checksum)
        )

    async def status(self) -> Session:
        """The session as the server has it, with its stored ``parts``."""
        return await self._run(multipart.status(self.upload_id))

    async def complete(self, parts: Sequence[Part | tuple[int, str]] | None = None) -> Object:
        """Assemble the object from ``parts`` (default: every stored part, in order)."""
        return await self._run(multipart.complete(self.upload_id, parts))

    async def abort(self) -> None:
        """Discard the session and its parts."""
        await self._run(multipart.abort(self.upload_id))

    def __repr__(self) -> str:
        return f"<AsyncMultipartUpload {self.bucket}/{self.key} {self.upload_id}>"
