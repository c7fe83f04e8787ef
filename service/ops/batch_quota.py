"""A batch's members against the bucket's quota, each before any of its bytes is staged.

A PUT knows its size before its body (``Content-Length``) and is refused up front when it
would take the bucket past its quota. A batch member declares its size in its tar header,
so it gets the same check at the same moment: ``BatchQuota.admit`` runs when the reader has
the member's header and before it stages a byte of it, and the member is refused
(``QuotaExceeded``, its data skipped) when its declared size does not fit. The room counts
the members this batch staged before it as if they were already stored, each net of what it
replaces (the stored version of its key, or an earlier member of the same key, when
versioning is off), so a batch cannot stage more than the quota leaves even though none of
its members is committed yet. The commits later pass the PUT's own checks again
(``precheck_put``, then ``apply``): this check only keeps bytes off the disk.

The state lives on the event loop; the reader runs on a thread of its own. ``on_loop``
runs one check there and waits for its answer. Only a bucket that has a quota when the
batch starts pays that hop per member (a quota set while a batch streams is enforced at
its commits, as for a PUT whose body is already on its way).

Thread-safety: ``BatchQuota`` is event-loop only; ``on_loop`` is called from the reader
thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

from service.common.api_errors import ApiError
from service.engine.core import Engine
from service.ops.buckets import require_bucket
from service.ops.objects import replaced_bytes

T = TypeVar("T")
Admit = Callable[[str, int], None]
"""``admit(key, size)``: returns when a member may be staged, else raises ``ApiError``."""


class BatchQuota:
    """The bucket's room as the members staged so far by one batch leave it."""

    def __init__(self, engine: Engine, bucket: str) -> None:
        self._engine = engine
        self._bucket = bucket
        self._added = 0
        """Bytes the admitted members add, net of what they replace."""
        self._sizes: dict[str, int] = {}
        """Key -> size of the last admitted member of that key (versioning off)."""

    def admit(self, key: str, size: int) -> None:
        """Count a member of ``size`` bytes at ``key``, or refuse it (QuotaExceeded)."""
        engine = self._engine
        record = require_bucket(engine, self._bucket)
        if record.quota_bytes is None:
            return
        if not record.versioning_enabled and key in self._sizes:
            replaced = self._sizes[key]
        else:
            replaced = replaced_bytes(record, engine.state.head_object(self._bucket, key, None))
        used = engine.state.bucket_usage(self._bucket).size_bytes + self._added
        if size > record.quota_bytes - used + replaced:
            raise ApiError("QuotaExceeded", "the member would take the bucket past its quota")
        self._added += size - replaced
        if not record.versioning_enabled:
            self._sizes[key] = size


def on_loop(loop: asyncio.AbstractEventLoop, function: Callable[[], T]) -> T:
    """Run ``function`` on ``loop`` (from another thread) and return its result or raise
    its exception."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(function())
        except BaseException as error:  # handed to the waiting thread
            done.set_exception(error)

    loop.call_soon_threadsafe(run)
    return done.result()


def quota_gate(engine: Engine, bucket: str) -> Admit | None:
    """The ``admit`` a batch into ``bucket`` uses from its reader thread, or None when the
    bucket has no quota now (event loop)."""
    try:
        record = require_bucket(engine, bucket)
    except ApiError:  # gone already: every member's commit says so, as for PUTs
        return None
    if record.quota_bytes is None:
        return None
    quota = BatchQuota(engine, bucket)
    loop = asyncio.get_running_loop()
    return lambda key, size: on_loop(loop, lambda: quota.admit(key, size))
