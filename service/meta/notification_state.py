"""Webhooks per bucket: their part of the metadata state and of ``apply``.

A bucket's webhooks are replaced as a whole by one ``NotificationsConfigured`` event (an
empty list removes them); ``MetaState`` dispatches the event here and calls
``forget_bucket`` when a bucket is deleted. A webhook is named by ``(bucket, id)``: one that
keeps its id across a replacement keeps its ``start_after`` (and so its delivery cursor,
``service.upkeep.webhooks``); a new one starts after the event's ``after_sequence``. The
record names the identity of the bucket the request was for (``service.meta.identity``): a
bucket deleted and created again meanwhile under the name never gets the old one's webhooks.

The secret is journaled (it signs every delivery, so the server needs it in the clear) and
never returned by the API.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread; records are immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.meta import fields, records
from service.meta.fields import MalformedEventError
from service.meta.identity import identity_refusal
from service.meta.outcome import Outcome, accepted

Handler = Callable[[Mapping[str, Any]], Outcome]


@dataclass(frozen=True, slots=True)
class Webhook:
    """Where and what to deliver for one bucket; ``start_after`` is the sequence after
    which its deliveries begin."""

    bucket: str
    id: str
    url: str
    events: tuple[str, ...]
    """Event types delivered; empty means every type."""
    prefix: str
    secret: str
    start_after: int

    def wants(self, event_type: str, key: str) -> bool:
        return key.startswith(self.prefix) and (not self.events or event_type in self.events)

    def to_document(self) -> dict[str, Any]:
        """The journaled and snapshotted form (the secret included)."""
        return {
            "id": self.id,
            "url": self.url,
            "events": list(self.events),
            "prefix": self.prefix,
            "secret": self.secret,
            "start_after": self.start_after,
        }

    @classmethod
    def from_document(cls, bucket: str, doc: Mapping[str, Any], start_after: int) -> Webhook:
        types = doc.get("events")
        if not isinstance(types, list | tuple) or not all(isinstance(t, str) for t in types):
            raise MalformedEventError("field 'events' must be a list of strings")
        return cls(
            bucket=bucket,
            id=fields.text(doc, "id"),
            url=fields.text(doc, "url"),
            events=tuple(types),
            prefix=fields.text(doc, "prefix"),
            secret=fields.text(doc, "secret"),
            start_after=start_after,
        )


class Notifications:
    """The webhooks of every bucket that has some."""

    def __init__(self, bucket_id_of: Callable[[str], str | None]) -> None:
        self._bucket_id_of = bucket_id_of
        self._webhooks: dict[str, tuple[Webhook, ...]] = {}

    def handlers(self) -> dict[str, Handler]:
        return {records.NOTIFICATIONS_CONFIGURED: self._configured}

    def images(self) -> dict[str, list[dict[str, Any]]]:
        """The webhooks as documents, bucket by bucket (for a snapshot)."""
        return {
            bucket: [hook.to_document() for hook in hooks]
            for bucket, hooks in self._webhooks.items()
        }

    def load(self, image: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Hold the webhooks of a snapshot image instead of the current ones."""
        self._webhooks = {
            bucket: tuple(
                Webhook.from_document(bucket, doc, fields.integer(doc, "start_after"))
                for doc in docs
            )
            for bucket, docs in image.items()
        }

    def forget_bucket(self, bucket: str) -> None:
        self._webhooks.pop(bucket, None)

    def webhooks(self, bucket: str) -> tuple[Webhook, ...]:
        """The bucket's webhooks in the order they were given (empty when none)."""
        return self._webhooks.get(bucket, ())

    def all_webhooks(self) -> list[Webhook]:
        """Every webhook of every bucket, by bucket then position."""
        return [hook for bucket in sorted(self._webhooks) for hook in self._webhooks[bucket]]

    def _configured(self, event: Mapping[str, Any]) -> Outcome:
        bucket = fields.text(event, "bucket")
        after = fields.integer(event, "after_sequence", minimum=0)
        fields.integer(event, "at")
        docs = event.get("webhooks")
        if not isinstance(docs, list | tuple) or not all(isinstance(d, Mapping) for d in docs):
            raise MalformedEventError("field 'webhooks' must be a list of maps")
        known = {hook.id: hook.start_after for hook in self._webhooks.get(bucket, ())}
        hooks = tuple(
            Webhook.from_document(bucket, doc, known.get(str(doc.get("id")), after)) for doc in docs
        )
        refusal = identity_refusal(self._bucket_id_of, bucket, event)
        if refusal is not None:
            return refusal
        if hooks:
            self._webhooks[bucket] = hooks
        else:
            self._webhooks.pop(bucket, None)
        return accepted(None)
