"""Lifecycle rules per bucket: their part of the metadata state and of ``apply``.

A bucket's rules are replaced as a whole by one ``LifecycleConfigured`` event (an empty list
removes them); ``MetaState`` dispatches the event here and calls ``forget_bucket`` when a
bucket is deleted, so a later bucket of the same name starts with no rules, and a record
accepted for the bucket before it (its identity, ``service.meta.identity``) is refused
there. The rules are
validated before they are journaled (``service.ops.lifecycle_rules``); ``apply`` only checks
the shapes, so a damaged event is refused instead of raising.

The actions the rules cause (expiring objects, removing noncurrent versions, aborting
uploads) are ordinary journaled operations made by ``service.upkeep.lifecycle``; nothing here
changes objects. Each action's record carries a *judgment*: the exact version the pass
judged due (its version id, payload id and ``updated_at``), which action and the cutoff.
``apply`` re-checks it against the key's versions at that point of the journal
(``judgment_problem``) and refuses the delete when the version is no longer there, no longer
in the position the action needs (current, noncurrent, a lone delete marker) or no longer
due. So a PUT whose record is queued while the pass judges the key can never be deleted by
it, whatever the interleaving.

Thread-safety: like ``MetaState``, mutate only on the event-loop thread; rules are immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.meta import fields, records
from service.meta.fields import MalformedEventError
from service.meta.identity import identity_refusal
from service.meta.model import NULL_VERSION_ID, ObjectVersion
from service.meta.outcome import Outcome, accepted, rejected

Handler = Callable[[Mapping[str, Any]], Outcome]

DAY_MS = 86_400_000

ACTIONS = ("expire_after_days", "noncurrent_expire_after_days", "abort_multipart_after_days")
"""The rule fields that name an action (a rule names at least one)."""


@dataclass(frozen=True, slots=True)
class LifecycleRule:
    """One rule: which keys (``prefix``) and after how many days each action applies."""

    id: str
    prefix: str
    enabled: bool
    expire_after_days: float | None
    noncurrent_expire_after_days: float | None
    abort_multipart_after_days: float | None

    def to_document(self) -> dict[str, Any]:
        """The rule as the API shows it and as the event carries it."""
        return {
            "id": self.id,
            "prefix": self.prefix,
            "enabled": self.enabled,
            "expire_after_days": self.expire_after_days,
            "noncurrent_expire_after_days": self.noncurrent_expire_after_days,
            "abort_multipart_after_days": self.abort_multipart_after_days,
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> LifecycleRule:
        """The rule of a journaled document; MalformedEventError if it is not one."""
        return cls(
            id=fields.text(doc, "id"),
            prefix=fields.text(doc, "prefix"),
            enabled=fields.flag(doc, "enabled"),
            expire_after_days=_days(doc, "expire_after_days"),
            noncurrent_expire_after_days=_days(doc, "noncurrent_expire_after_days"),
            abort_multipart_after_days=_days(doc, "abort_multipart_after_days"),
        )


def _days(doc: Mapping[str, Any], name: str) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MalformedEventError(f"field {name!r} must be a positive number or null")
    return float(value)


def days_to_ms(days: float) -> int:
    """A rule's age threshold in milliseconds (0.0001 days is 8,640 ms)."""
    return round(days * DAY_MS)


EXPIRE = "expire"
"""The key's current version (not a delete marker) was written before the cutoff."""
NONCURRENT = "noncurrent"
"""A version stopped being current (its successor was created) before the cutoff."""
LONE_MARKER = "lone_marker"
"""A delete marker, the key's only version, was written before the cutoff."""
JUDGMENT_KINDS = frozenset({EXPIRE, NONCURRENT, LONE_MARKER})


def is_due(kind: str, versions: Sequence[ObjectVersion], position: int, cutoff: int) -> bool:
    """Whether ``versions[position]`` (a key's versions, oldest first) is due under the
    action ``kind`` with ``cutoff`` (ms): the one rule the pass and ``apply`` both use."""
    version = versions[position]
    last = position == len(versions) - 1
    if kind == EXPIRE:
        return last and not version.is_delete_marker and version.updated_at < cutoff
    if kind == NONCURRENT:
        return not last and versions[position + 1].created_at < cutoff
    if kind == LONE_MARKER:
        return len(versions) == 1 and version.is_delete_marker and version.updated_at < cutoff
    return False


def judgment(
    kind: str, version: ObjectVersion, cutoff: int, bucket_id: str | None = None
) -> dict[str, Any]:
    """What a lifecycle delete record carries: the version judged and why, and the identity
    of the bucket whose rule judged it (``apply`` refuses the delete in another bucket of
    that name, ``service.meta.identity``)."""
    if kind not in JUDGMENT_KINDS:
        raise ValueError(f"unknown lifecycle judgment {kind!r}")
    judged: dict[str, Any] = {
        "kind": kind,
        "version_id": version.version_id,
        "payload_id": version.payload_id,
        "updated_at": version.updated_at,
        "cutoff": cutoff,
    }
    if bucket_id is not None:
        judged["bucket_id"] = bucket_id
    return judged


def judgment_problem(judged: Any, versions: Sequence[ObjectVersion]) -> str | None:
    """Why a lifecycle delete judged as ``judged`` must not apply to the key's ``versions``
    now (None: it may). MalformedEventError when ``judged`` is not a judgment."""
    if not isinstance(judged, Mapping):
        raise MalformedEventError("field 'judged' must be a map")
    kind = fields.text(judged, "kind")
    version_id = fields.optional_text(judged, "version_id")
    payload_id = fields.optional_text(judged, "payload_id")
    updated_at = fields.integer(judged, "updated_at")
    cutoff = fields.integer(judged, "cutoff")
    if kind not in JUDGMENT_KINDS:
        raise MalformedEventError(f"unknown lifecycle judgment {kind!r}")
    wanted = None if version_id == NULL_VERSION_ID else version_id
    position = next((i for i, v in enumerate(versions) if v.version_id == wanted), None)
    if position is None:
        return "the version the lifecycle judged is gone"
    version = versions[position]
    if version.payload_id != payload_id or version.updated_at != updated_at:
        return "the version the lifecycle judged was replaced"
    if not is_due(kind, versions, position, cutoff):
        return f"the version the lifecycle judged is no longer due ({kind})"
    return None


def judged_refusal(
    judged: Any,
    versions: Sequence[ObjectVersion],
    bucket_id_of: Callable[[str], str | None],
    bucket: str,
) -> Outcome | None:
    """Why a lifecycle delete judged as ``judged`` must be refused now (None: it may apply):
    the rule was another bucket's of the name (``service.meta.identity``), or the judged
    version is no longer there and due (``judgment_problem``)."""
    if isinstance(judged, Mapping):
        refusal = identity_refusal(bucket_id_of, bucket, judged)
        if refusal is not None:
            return refusal
    problem = judgment_problem(judged, versions)
    return None if problem is None else rejected("PreconditionFailed", problem)


class Lifecycle:
    """The rules of every bucket that has some."""

    def __init__(self, bucket_id_of: Callable[[str], str | None]) -> None:
        self._bucket_id_of = bucket_id_of
        self._rules: dict[str, tuple[LifecycleRule, ...]] = {}

    def handlers(self) -> dict[str, Handler]:
        return {records.LIFECYCLE_CONFIGURED: self._configured}

    def images(self) -> dict[str, list[dict[str, Any]]]:
        """The rules as documents, bucket by bucket (for a snapshot)."""
        return {bucket: [r.to_document() for r in rules] for bucket, rules in self._rules.items()}

    def load(self, image: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Hold the rules of a snapshot image instead of the current ones."""
        self._rules = {
            bucket: tuple(LifecycleRule.from_document(doc) for doc in docs)
            for bucket, docs in image.items()
        }

    def forget_bucket(self, bucket: str) -> None:
        self._rules.pop(bucket, None)

    def rules(self, bucket: str) -> tuple[LifecycleRule, ...]:
        """The bucket's rules in the order they were given (empty when none)."""
        return self._rules.get(bucket, ())

    def buckets(self) -> list[str]:
        """Buckets that have rules, by name."""
        return sorted(self._rules)

    def _configured(self, event: Mapping[str, Any]) -> Outcome:
        bucket = fields.text(event, "bucket")
        fields.integer(event, "at")
        docs = event.get("rules")
        if not isinstance(docs, list | tuple) or not all(isinstance(d, Mapping) for d in docs):
            raise MalformedEventError("field 'rules' must be a list of maps")
        rules = tuple(LifecycleRule.from_document(doc) for doc in docs)
        refusal = identity_refusal(self._bucket_id_of, bucket, event)
        if refusal is not None:
            return refusal
        if rules:
            self._rules[bucket] = rules
        else:
            self._rules.pop(bucket, None)
        return accepted(None)
