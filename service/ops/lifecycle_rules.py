"""Lifecycle rules of a bucket: validate a client's document, journal it, read it back.

Transport-free (the HTTP handlers call these). A document is refused whole, with
400 InvalidArgument naming the first problem, and changes nothing; a valid one replaces the
bucket's rules in one ``LifecycleConfigured`` record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from service.common.api_errors import ApiError
from service.common.names import key_problem
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.meta import records
from service.meta.lifecycle_state import ACTIONS, LifecycleRule
from service.ops.buckets import outcome_error, require_bucket

MAX_RULES = 100
MAX_RULE_ID_CHARS = 255
MAX_DAYS = 100 * 365
RULE_FIELDS = frozenset({"id", "prefix", "enabled", *ACTIONS})


def _invalid(message: str) -> ApiError:
    return ApiError("InvalidArgument", message)


def _days(doc: Mapping[str, Any], name: str, where: str) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_DAYS
    ):
        raise _invalid(f"{where}: {name} must be a positive number of days up to {MAX_DAYS}")
    return float(value)


def parse_rule(doc: Any, index: int) -> LifecycleRule:
    """One rule of a client's document, or 400 InvalidArgument."""
    where = f"rules[{index}]"
    if not isinstance(doc, Mapping):
        raise _invalid(f"{where} must be an object")
    unknown = sorted(set(doc) - RULE_FIELDS)
    if unknown:
        raise _invalid(f"{where}: unknown field {unknown[0]!r}")
    rule_id = doc.get("id")
    if not isinstance(rule_id, str) or not 1 <= len(rule_id) <= MAX_RULE_ID_CHARS:
        raise _invalid(f"{where}: id must be a string of 1 to {MAX_RULE_ID_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in rule_id):
        raise _invalid(f"{where}: id must not contain control characters")
    prefix = doc.get("prefix", "")
    if not isinstance(prefix, str) or (prefix and key_problem(prefix)):
        raise _invalid(f"{where}: prefix must be a string shaped like the start of a key")
    enabled = doc.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _invalid(f"{where}: enabled must be true or false")
    days = {name: _days(doc, name, where) for name in ACTIONS}
    if all(value is None for value in days.values()):
        raise _invalid(f"{where}: a rule names at least one of {', '.join(ACTIONS)}")
    return LifecycleRule(
        id=rule_id,
        prefix=prefix,
        enabled=enabled,
        expire_after_days=days["expire_after_days"],
        noncurrent_expire_after_days=days["noncurrent_expire_after_days"],
        abort_multipart_after_days=days["abort_multipart_after_days"],
    )


def parse_rules(body: Mapping[str, Any]) -> list[LifecycleRule]:
    """The rules of a ``PUT .../lifecycle`` body, or 400 InvalidArgument."""
    unknown = sorted(set(body) - {"rules"})
    if unknown:
        raise _invalid(f"unknown field {unknown[0]!r}")
    docs = body.get("rules")
    if not isinstance(docs, list):
        raise _invalid("rules must be a list of rules")
    if len(docs) > MAX_RULES:
        raise _invalid(f"at most {MAX_RULES} rules per bucket")
    rules = [parse_rule(doc, index) for index, doc in enumerate(docs)]
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise _invalid(f"rule id {rule.id!r} is used twice")
        seen.add(rule.id)
    return rules


def rules_document(engine: Engine, bucket: str) -> dict[str, Any]:
    """``{"rules": [...]}`` of an existing bucket (404 NoSuchBucket otherwise)."""
    require_bucket(engine, bucket)
    return {"rules": [rule.to_document() for rule in engine.state.lifecycle.rules(bucket)]}


async def set_rules(engine: Engine, bucket: str, rules: list[LifecycleRule]) -> dict[str, Any]:
    """Replace the bucket's rules (an empty list removes them); the stored document."""
    record = require_bucket(engine, bucket)
    engine.ensure_writable()
    outcome = await engine.commit(
        records.lifecycle_configured(
            bucket=bucket,
            rules=[rule.to_document() for rule in rules],
            at=now_ms(),
            bucket_id=record.bucket_id,
        )
    )
    if not outcome.ok:
        raise outcome_error(outcome)
    return rules_document(engine, bucket)
