"""``events``: a bucket's Server-Sent Events stream as an async iterator of ``Event``.

The stream is opened through the driver (authentication, retries and error mapping are the
client's), then read a chunk at a time through ``_sse``. It resumes as a browser's
``EventSource`` does: the sequence of the last event seen is sent as ``Last-Event-ID`` when
the connection drops or the server ends the stream (a graceful restart closes it), so no
retained event is missed or repeated. Reconnections back off (``reconnect_delay``) and give
up after ``part_retries`` failures in a row without an event in between, raising the last
error; a server answer that is an error (404 NoSuchBucket once the bucket is gone, 410
EventsExpired) is raised at once. Of the two event modules the async one is the source:
``scripts/unasync.py`` writes the sync one from it.

Thread-safety: an iterator belongs to one task or thread; closing it (leaving the ``for``)
closes its connection.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import httpx

from service.client import _ops_upkeep as upkeep
from service.client._async_io import AsyncDriver
from service.client._exceptions import TransportError, transport_error
from service.client._models_upkeep import Event
from service.client._sse import SseParser

__all__ = ["stream_events"]


async def stream_events(
    driver: AsyncDriver, bucket: str, after: str | None, reconnect: bool
) -> AsyncIterator[Event]:
    """Every event of ``bucket`` after sequence ``after`` (from the next one when None)."""
    policy = driver.config.retry
    failures = 0
    retry_ms: int | None = None
    while True:
        try:
            reply = await driver.run(upkeep.open_events(bucket, after))
        except TransportError:
            if not reconnect or failures >= policy.part_retries:
                raise
            await asyncio.sleep(upkeep.reconnect_delay(policy, failures, retry_ms, random.random()))
            failures += 1
            continue
        response = reply.raw
        assert response is not None  # a streamed call hands its response over
        parser = SseParser()
        received = False
        try:
            async for chunk in response.aiter_bytes():
                for message in parser.feed(chunk):
                    event = upkeep.event_from_message(message)
                    after = parser.last_id or str(event.sequence)
                    failures, received = 0, True
                    yield event
            error: TransportError | None = None
        except httpx.HTTPError as exc:
            error = transport_error(exc)
            error.__cause__ = exc
        finally:
            await response.aclose()
        retry_ms = parser.retry_ms
        if not reconnect or failures >= policy.part_retries:
            if error is not None:
                raise error
            return  # the server ended the stream and we may not (or no longer) reconnect
        if error is not None or not received:
            await asyncio.sleep(upkeep.reconnect_delay(policy, failures, retry_ms, random.random()))
            failures += 1
