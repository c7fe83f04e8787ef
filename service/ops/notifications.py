"""Webhooks of a bucket: validate a client's document, journal it, show it back.

Transport-free (the HTTP handlers call these). A document is refused whole with 400
InvalidArgument naming the first problem and changes nothing; a valid one replaces the
bucket's webhooks in one ``NotificationsConfigured`` record. Secrets are journaled (they sign
every delivery) and never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from service.common.api_errors import ApiError
from service.common.names import key_problem
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.events.feed import EVENT_TYPES
from service.events.targets import TargetPolicy
from service.meta import records
from service.ops.buckets import outcome_error, require_bucket

MAX_WEBHOOKS = 20
MAX_ID_CHARS = 255
MAX_URL_CHARS = 2048
MAX_SECRET_CHARS = 1024
WEBHOOK_FIELDS = frozenset({"id", "url", "events", "prefix", "secret"})


def _invalid(message: str) -> ApiError:
    return ApiError("InvalidArgument", message)


def _printable(text: str) -> bool:
    return all(32 <= ord(ch) != 127 for ch in text)


def parse_webhook(doc: Any, index: int) -> dict[str, Any]:
    """One webhook of a client's document as the event carries it, or 400."""
    where = f"webhooks[{index}]"
    if not isinstance(doc, Mapping):
        raise _invalid(f"{where} must be an object")
    unknown = sorted(set(doc) - WEBHOOK_FIELDS)
    if unknown:
        raise _invalid(f"{where}: unknown field {unknown[0]!r}")
    hook_id = doc.get("id")
    if not isinstance(hook_id, str) or not 1 <= len(hook_id) <= MAX_ID_CHARS:
        raise _invalid(f"{where}: id must be a string of 1 to {MAX_ID_CHARS} characters")
    if not _printable(hook_id):
        raise _invalid(f"{where}: id must not contain control characters")
    url = doc.get("url")
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not _printable(url):
        raise _invalid(f"{where}: url must be an http or https URL")
    try:
        parts = urlsplit(url)
        valid_port = parts.port is None or parts.port > 0
    except ValueError:  # a bad port, or brackets around something that is no IPv6 address
        raise _invalid(
            f"{where}: url must be an absolute http or https URL (bad host or port)"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not valid_port:
        raise _invalid(f"{where}: url must be an absolute http or https URL")
    types = doc.get("events", [])
    if not isinstance(types, list) or not all(t in EVENT_TYPES for t in types):
        raise _invalid(f"{where}: events must be a list of {', '.join(EVENT_TYPES)}")
    prefix = doc.get("prefix", "")
    if not isinstance(prefix, str) or (prefix and key_problem(prefix)):
        raise _invalid(f"{where}: prefix must be a string shaped like the start of a key")
    secret = doc.get("secret")
    if not isinstance(secret, str) or not 1 <= len(secret) <= MAX_SECRET_CHARS:
        raise _invalid(f"{where}: secret must be a string of 1 to {MAX_SECRET_CHARS} characters")
    return {
        "id": hook_id,
        "url": url,
        "events": sorted(set(types)),
        "prefix": prefix,
        "secret": secret,
    }


def parse_webhooks(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The webhooks of a ``PUT .../notifications`` body, or 400 InvalidArgument."""
    unknown = sorted(set(body) - {"webhooks"})
    if unknown:
        raise _invalid(f"unknown field {unknown[0]!r}")
    docs = body.get("webhooks")
    if not isinstance(docs, list):
        raise _invalid("webhooks must be a list of webhooks")
    if len(docs) > MAX_WEBHOOKS:
        raise _invalid(f"at most {MAX_WEBHOOKS} webhooks per bucket")
    hooks = [parse_webhook(doc, index) for index, doc in enumerate(docs)]
    ids = [hook["id"] for hook in hooks]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise _invalid(f"webhook id {duplicate!r} is used twice")
    return hooks


async def set_webhooks(engine: Engine, bucket: str, hooks: list[dict[str, Any]]) -> None:
    """Replace the bucket's webhooks (an empty list removes them). A URL whose host is an
    address the operator does not allow, in any spelling, or no usable host at all
    (``service.events.targets``) is refused with 400."""
    record = require_bucket(engine, bucket)
    policy = TargetPolicy.parse(engine.config.webhook_allowed_networks)
    for index, hook in enumerate(hooks):
        problem = policy.literal_problem(hook["url"])
        if problem is not None:
            raise _invalid(f"webhooks[{index}]: url points at {problem}")
    engine.ensure_writable()
    after = engine.committer.last_sequence()
    outcome = await engine.commit(
        records.notifications_configured(
            bucket=bucket,
            webhooks=hooks,
            after_sequence=after,
            at=now_ms(),
            bucket_id=record.bucket_id,
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)
