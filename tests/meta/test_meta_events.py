"""Event constructors and the totality of apply: unknown and malformed events never raise."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.common.api_errors import STATUS_BY_CODE
from service.meta import ERROR_CODES, MetaState, records
from tests.meta.factory import Factory, applied


def every_event(f: Factory) -> list[records.Event]:
    """One event of each type, in an order where each applies cleanly."""
    start = f.start()
    upload_id = start["upload_id"]
    job = f.job()
    job_id = job["job_id"]
    share = f.share(job_id)
    bucket = f.bucket()
    locked = f.put("held", bucket="lk")
    return [
        records.server_initialized(server_id="srv-1", at=f.at()),
        records.user_created(user_id="u1", username="ada", password_hash="h", role="admin", at=1),
        records.access_key_created(
            access_key_id="bk_1", user_id="u1", name="n", secret_digest="d", at=2
        ),
        records.access_keys_used(last_used={"bk_1": 3}, at=4),
        records.access_key_updated(access_key_id="bk_1", status="revoked", at=5),
        records.access_key_deleted(access_key_id="bk_1", at=6),
        records.user_updated(user_id="u1", changes={"status": "disabled"}, at=7),
        bucket,
        f.update(tags={"k": "v"}),
        records.lifecycle_configured(
            bucket="b",
            rules=[
                {
                    "id": "r",
                    "prefix": "",
                    "enabled": True,
                    "expire_after_days": 1.5,
                    "noncurrent_expire_after_days": None,
                    "abort_multipart_after_days": None,
                }
            ],
            at=f.at(),
            bucket_id=bucket["bucket_id"],
        ),
        records.notifications_configured(
            bucket="b",
            webhooks=[{"id": "w", "url": "http://h/", "events": [], "prefix": "", "secret": "s"}],
            after_sequence=3,
            at=f.at(),
            bucket_id=bucket["bucket_id"],
        ),
        f.put("k"),
        f.delete("k"),
        start,
        f.part(upload_id, 1),
        f.complete(upload_id, [1]),
        f.start(),
        records.upload_aborted(upload_id=f"up{f.serial:06d}", reason="expired", at=f.at()),
        job,
        *f.job_done(job_id),
        fleet_job := f.job(),
        *f.fleet_done(fleet_job["job_id"]),
        share,
        records.video_share_revoked(share_id=share["share_id"], reason="revoked", at=f.at()),
        records.video_job_deleted(job_id=job_id, at=f.at()),
        f.drop_bucket(force=True),
        f.lock_bucket(),
        locked,
        f.retention("held", locked["version_token"], "governance", f.now + 60_000),
        f.legal_hold("held", locked["version_token"], True),
        records.user_deleted(user_id="u1", at=8),
        records.epoch_started(epoch=1, sequence=1, server_id="srv-1", at=9),
    ]


def test_every_event_type_has_a_constructor_whose_event_applies() -> None:
    state = MetaState()
    built = every_event(Factory())
    assert {event["type"] for event in built} == records.EVENT_TYPES
    for event in built:
        applied(state, event)
    assert state.server_id == "srv-1"
    assert state.anomalies() == {}


def test_events_survive_a_msgpack_round_trip_unchanged() -> None:
    for event in every_event(Factory()):
        packed = msgpack.packb(event, use_bin_type=True)
        assert msgpack.unpackb(packed, raw=False) == event


def test_constructors_refuse_fields_no_event_may_carry() -> None:
    with pytest.raises(ValueError):
        records.bucket_updated(name="b", changes={"owner": "u2"}, at=1)
    with pytest.raises(ValueError):
        records.user_updated(user_id="u1", changes={"username": "x"}, at=1)
    with pytest.raises(ValueError):
        records.upload_aborted(upload_id="up", reason="bored", at=1)


def test_rejection_codes_are_codes_of_the_wire_contract() -> None:
    assert set(STATUS_BY_CODE) >= ERROR_CODES


def test_a_second_server_initialized_is_refused() -> None:
    state = MetaState()
    applied(state, records.server_initialized(server_id="one", at=1))
    assert state.apply(records.server_initialized(server_id="two", at=2)).error_code == (
        "InvalidState"
    )
    assert state.server_id == "one"


def test_unknown_event_types_are_rejected_and_counted() -> None:
    state = MetaState()
    for _ in range(2):
        outcome = state.apply({"type": "BucketRenamed", "name": "b", "at": 1})
        assert (outcome.ok, outcome.error_code) == (False, "InternalError")
    state.apply({"no": "type"})
    assert state.anomalies() == {"unknown:BucketRenamed": 2, "unknown:None": 1}


def test_a_malformed_event_is_rejected_without_changing_the_state() -> None:
    f, state = Factory(), MetaState()
    applied(state, f.bucket())
    event = f.put("k")
    event["size"] = "12"
    before = state.freeze()
    outcome = state.apply(event)
    assert (outcome.ok, outcome.error_code, outcome.released_payloads) == (
        False,
        "InternalError",
        (),
    )
    assert "size" in (outcome.error_message or "")
    assert state.anomalies() == {"malformed:ObjectStored": 1}
    assert state.freeze().buckets == before.buckets
    assert state.freeze().objects == before.objects


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.text(max_size=4),
    st.lists(st.integers(-2, 3), max_size=3),
    st.dictionaries(st.text(max_size=2), st.one_of(st.text(max_size=2), st.integers()), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_apply_never_raises_whatever_the_fields_hold(data: st.DataObject) -> None:
    f = Factory()
    state = MetaState()
    templates = every_event(f)
    for event in templates[:12]:
        state.apply(event)
    template = data.draw(st.sampled_from(templates))
    mutated: dict[str, Any] = dict(template)
    for name in data.draw(st.lists(st.sampled_from(sorted(template)), max_size=3)):
        if data.draw(st.booleans()):
            mutated.pop(name, None)
        else:
            mutated[name] = data.draw(_values)
    outcome = state.apply(mutated)
    assert outcome.ok or outcome.error_code in ERROR_CODES
