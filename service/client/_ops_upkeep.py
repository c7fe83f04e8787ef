"""Flows for the upkeep routes: lifecycle rules, webhooks, scrub, and the bucket event stream.

Each function builds the request of one endpoint and parses its answer, as in the other
``_ops_*`` modules. The event stream is the one long-lived request: ``open_events`` only
opens it (the body stays unread, ``Call(stream=True)``); the clients' ``_async_events`` and
``_events`` read it through ``_sse`` and turn each message into an ``Event`` with
``event_from_message``. ``reconnect_delay`` is the back-off between reconnections. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from service.client._exceptions import ServiceError, UnexpectedResponseError, error_from_response
from service.client._flow import Call, Flow, Reply, RetryPolicy, request
from service.client._models import parse
from service.client._models_upkeep import (
    Event,
    LifecycleRule,
    LifecycleRun,
    ScrubStatus,
    Webhook,
)
from service.client._paths import api, bucket_path
from service.client._sse import Message

__all__ = [
    "delete_lifecycle",
    "delete_notifications",
    "event_from_message",
    "get_lifecycle",
    "get_notifications",
    "open_events",
    "openapi",
    "put_lifecycle",
    "put_notifications",
    "reconnect_delay",
    "run_lifecycle",
    "scrub_status",
    "start_scrub",
]

#: The status a mid-stream ``event: error`` message stands for (the server sends one when
#: retention overtook a reader that fell behind: the same error as a too-old resume point).
_STREAM_ERROR_STATUS = 410
_END_ERRORS = {
    "bucket_deleted": (404, "NoSuchBucket"),
    "user_disabled": (403, "AccountDisabled"),
    "access_denied": (403, "AccessDenied"),
}
"""The status and code a stream's ``end`` reason stands for; the other reasons (a key, a
token or a user gone) are 401 Unauthorized."""


def _rules(document: Any) -> list[LifecycleRule]:
    return parse(lambda doc: [LifecycleRule.from_json(item) for item in doc["rules"]], document)


def _webhooks(document: Any) -> list[Webhook]:
    return parse(lambda doc: [Webhook.from_json(item) for item in doc["webhooks"]], document)


def _rule_json(rule: LifecycleRule | Mapping[str, Any]) -> Mapping[str, Any]:
    return rule.to_json() if isinstance(rule, LifecycleRule) else rule


def _webhook_json(hook: Webhook | Mapping[str, Any]) -> Mapping[str, Any]:
    return hook.to_json() if isinstance(hook, Webhook) else hook


def get_lifecycle(bucket: str) -> Flow[list[LifecycleRule]]:
    reply = yield from request(Call("GET", f"{bucket_path(bucket)}/lifecycle"))
    return _rules(reply.json())


def put_lifecycle(
    bucket: str, rules: Sequence[LifecycleRule | Mapping[str, Any]]
) -> Flow[list[LifecycleRule]]:
    body = {"rules": [_rule_json(rule) for rule in rules]}
    reply = yield from request(Call("PUT", f"{bucket_path(bucket)}/lifecycle", json=body))
    return _rules(reply.json())


def delete_lifecycle(bucket: str) -> Flow[None]:
    yield from request(Call("DELETE", f"{bucket_path(bucket)}/lifecycle"))


def run_lifecycle() -> Flow[LifecycleRun]:
    reply = yield from request(Call("POST", api("/system/lifecycle/run")))
    return parse(LifecycleRun.from_json, reply.json())


def get_notifications(bucket: str) -> Flow[list[Webhook]]:
    reply = yield from request(Call("GET", f"{bucket_path(bucket)}/notifications"))
    return _webhooks(reply.json())


def put_notifications(
    bucket: str, webhooks: Sequence[Webhook | Mapping[str, Any]]
) -> Flow[list[Webhook]]:
    body = {"webhooks": [_webhook_json(hook) for hook in webhooks]}
    reply = yield from request(Call("PUT", f"{bucket_path(bucket)}/notifications", json=body))
    return _webhooks(reply.json())


def delete_notifications(bucket: str) -> Flow[None]:
    yield from request(Call("DELETE", f"{bucket_path(bucket)}/notifications"))


def scrub_status() -> Flow[ScrubStatus]:
    reply = yield from request(Call("GET", api("/system/scrub")))
    return parse(ScrubStatus.from_json, reply.json())


def start_scrub() -> Flow[ScrubStatus]:
    reply = yield from request(Call("POST", api("/system/scrub")))
    return parse(ScrubStatus.from_json, reply.json())


def openapi() -> Flow[dict[str, Any]]:
    reply = yield from request(Call("GET", api("/openapi.json")))
    document = reply.json()
    if not isinstance(document, dict):
        raise UnexpectedResponseError("expected a JSON object", status=reply.status)
    return document


def open_events(bucket: str, after: str | None) -> Flow[Reply]:
    """Open the bucket's event stream, resuming after sequence ``after`` (``Last-Event-ID``)
    or, without it, at the next event. The reply's ``raw`` response is the caller's."""
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if after is not None:
        headers["Last-Event-ID"] = after
    call = Call("GET", f"{bucket_path(bucket)}/events", headers=headers, stream=True)
    return (yield from request(call))


def event_from_message(message: Message) -> Event:
    """The ``Event`` a stream message carries; an ``error`` message becomes the error it
    names (``EventsExpired``: the reader fell behind the server's retention), and an ``end``
    message (the server ended the stream: its credentials or its bucket went) the error
    that reconnecting would get."""
    if message.event == "error":
        raise _stream_error(message.data)
    if message.event == "end":
        raise _stream_end(message.data)
    try:
        document = json.loads(message.data)
    except ValueError as exc:
        raise UnexpectedResponseError(f"event is not JSON: {message.data[:80]!r}") from exc
    return parse(Event.from_json, document)


def _stream_error(data: str) -> ServiceError:
    return error_from_response(_STREAM_ERROR_STATUS, {}, data.encode("utf-8"))


def _stream_end(data: str) -> ServiceError:
    """The error a stream's ``end`` message stands for: what reconnecting would answer."""
    try:
        document = json.loads(data)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        document = {}
    reason = str(document.get("reason", "unknown"))
    status, code = _END_ERRORS.get(reason, (401, "Unauthorized"))
    text = f"the event stream ended: {document.get('message') or reason}"
    body = json.dumps({"error": {"code": code, "message": text}}).encode("utf-8")
    return error_from_response(status, {}, body)


def reconnect_delay(policy: RetryPolicy, attempt: int, retry_ms: int | None, rand: float) -> float:
    """Seconds before reconnection number ``attempt + 1`` of an event stream: the server's
    ``retry:`` when it sent one, else the client's jittered back-off.

    >>> reconnect_delay(RetryPolicy(backoff=1.0, max_backoff=3.0), 5, None, 1.0)
    3.0
    >>> reconnect_delay(RetryPolicy(), 0, 250, 0.0)
    0.25
    """
    if retry_ms is not None:
        return retry_ms / 1000
    ceiling = min(policy.max_backoff, policy.backoff * 2.0**attempt)
    return ceiling / 2 + ceiling / 2 * rand
