"""The bucket event stream (``GET /api/v1/buckets/{bucket}/events``, Server-Sent Events).

``service.client`` has no call for it yet, so this module describes the one request with the
client's own ``Call`` and runs it on the client's driver: authentication, retries and the
mapping of error answers to exceptions are the client's, not a second HTTP layer. When the
client gains an events call, this module shrinks to using it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from service.cli.sse import SseParser
from service.client import ServiceClient
from service.client._exceptions import transport_error
from service.client._flow import Call, Reply, request
from service.client._paths import bucket_path

__all__ = ["stream_events"]


def stream_events(
    client: ServiceClient, bucket: str, *, since: str | None = None
) -> Iterator[dict[str, Any]]:
    """The bucket's events as they happen (each the contract's event document)."""
    headers = {"Accept": "text/event-stream"}
    if since is not None:
        headers["Last-Event-ID"] = since
    call = Call("GET", bucket_path(bucket) + "/events", headers=headers, stream=True)
    reply: Reply = client._driver.run(request(call))
    response = reply.raw
    assert response is not None
    parser = SseParser()
    try:
        for chunk in response.iter_bytes():
            for event in parser.feed(chunk):
                try:
                    document = json.loads(event.data)
                except ValueError:
                    document = {"data": event.data}
                if isinstance(document, dict):
                    document.setdefault("sequence", event.id)
                    yield document
    except httpx.HTTPError as exc:
        raise transport_error(exc) from exc
    finally:
        response.close()
