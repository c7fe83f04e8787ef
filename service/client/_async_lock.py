"""``AsyncObjectLock``: a bucket handle's object lock methods (retention, legal hold).

A mixin of ``AsyncBucketClient`` (which sits first in its bases, so its own ``_run`` is the
one used), kept apart so each module stays short. The async module is the source
(``scripts/unasync.py`` writes ``_lock`` from it): edit this one, never the copy.

Thread-safety: as the bucket handle's.
"""

from __future__ import annotations

import datetime
from typing import TypeVar

from service.client import _ops_lock as lock
from service.client._flow import Flow
from service.client._models_lock import LegalHold, ObjectRetention

__all__ = ["AsyncObjectLock"]

T = TypeVar("T")


class AsyncObjectLock:
    """Retention and legal hold of one bucket's versions (a lock bucket's: see
    ``client.buckets.create(..., object_lock_enabled=True)``)."""

    name: str

    async def _run(self, flow: Flow[T]) -> T:
        raise NotImplementedError  # the bucket handle's

    async def get_retention(self, key: str, *, version_id: str | None = None) -> ObjectRetention:
        """The retention of ``key``'s current version (or of ``version_id``)."""
        return await self._run(lock.get_retention(self.name, key, version_id))

    async def set_retention(
        self,
        key: str,
        mode: str | None,
        retain_until: datetime.datetime | None,
        *,
        version_id: str | None = None,
        bypass_governance: bool = False,
    ) -> ObjectRetention:
        """Set (``governance`` or ``compliance`` until an aware ``retain_until``), lengthen,
        or with ``None, None`` remove a version's retention. Shortening or removing an
        active governance retention needs an admin's ``bypass_governance=True``; an active
        compliance one cannot be (ObjectLockedError)."""
        flow = lock.set_retention(
            self.name,
            key,
            mode,
            retain_until,
            version_id=version_id,
            bypass_governance=bypass_governance,
        )
        return await self._run(flow)

    async def get_legal_hold(self, key: str, *, version_id: str | None = None) -> LegalHold:
        """Whether a legal hold keeps ``key``'s current version (or ``version_id``)."""
        return await self._run(lock.get_legal_hold(self.name, key, version_id))

    async def set_legal_hold(
        self, key: str, on: bool, *, version_id: str | None = None
    ) -> LegalHold:
        """Turn a version's legal hold on or off (it lasts until turned off)."""
        return await self._run(lock.set_legal_hold(self.name, key, on, version_id))
