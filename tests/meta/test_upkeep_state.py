"""Lifecycle rules and webhooks in the state: apply, snapshots, bucket deletion, cursors."""

from __future__ import annotations

from service.meta import MetaState, decode_snapshot, encode_snapshot, records
from tests.meta.factory import Factory, applied

RULE = {
    "id": "r",
    "prefix": "logs/",
    "enabled": True,
    "expire_after_days": 0.5,
    "noncurrent_expire_after_days": None,
    "abort_multipart_after_days": 2,
}
HOOK = {"id": "w", "url": "http://127.0.0.1:1/", "events": [], "prefix": "", "secret": "s"}


def configured(f: Factory, **hooks: dict[str, object]) -> MetaState:
    state = MetaState()
    created = f.bucket()
    applied(state, created)
    bucket_id = created["bucket_id"]
    rules = records.lifecycle_configured(bucket="b", rules=[RULE], at=f.at(), bucket_id=bucket_id)
    applied(state, rules)
    applied(
        state,
        records.notifications_configured(
            bucket="b", webhooks=[HOOK], after_sequence=7, at=f.at(), bucket_id=bucket_id
        ),
    )
    return state


def test_rules_and_webhooks_survive_a_snapshot_round_trip() -> None:
    state = configured(Factory())
    restored = decode_snapshot(encode_snapshot(state))
    assert restored == state
    (rule,) = restored.lifecycle.rules("b")
    assert (rule.prefix, rule.expire_after_days, rule.abort_multipart_after_days) == (
        "logs/",
        0.5,
        2.0,
    )
    (hook,) = restored.notifications.webhooks("b")
    assert (hook.url, hook.secret, hook.start_after) == (HOOK["url"], "s", 7)


def test_a_webhook_keeps_its_start_when_reconfigured_and_a_new_one_starts_later() -> None:
    f = Factory()
    state = configured(f)
    other = {**HOOK, "id": "x"}
    event = records.notifications_configured(
        bucket="b",
        webhooks=[HOOK, other],
        after_sequence=20,
        at=f.at(),
        bucket_id=state.bucket_id_of("b") or "",
    )
    applied(state, event)
    assert [h.start_after for h in state.notifications.webhooks("b")] == [7, 20]


def test_deleting_the_bucket_forgets_its_rules_and_webhooks() -> None:
    f = Factory()
    state = configured(f)
    applied(state, f.drop_bucket(force=True))
    applied(state, f.bucket())
    assert state.lifecycle.rules("b") == ()
    assert state.notifications.webhooks("b") == ()


def test_configuring_a_missing_bucket_or_a_malformed_rule_is_rejected() -> None:
    state = MetaState()
    missing = "bkt_" + "0" * 24
    outcome = state.apply(
        records.lifecycle_configured(bucket="nope", rules=[RULE], at=1, bucket_id=missing)
    )
    assert not outcome.ok and outcome.error_code == "NoSuchBucket"
    bad = {**RULE, "expire_after_days": -1}
    outcome = state.apply(
        records.lifecycle_configured(bucket="nope", rules=[bad], at=1, bucket_id=missing)
    )
    assert not outcome.ok and state.anomalies() == {"malformed:LifecycleConfigured": 1}
