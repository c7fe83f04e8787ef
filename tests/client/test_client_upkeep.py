"""Lifecycle rules, webhooks, scrub, the event stream and paged upload listings, end to end.

Each test that takes ``client`` runs against both flavours (``AsyncServiceClient`` seen
through ``dualclient.blocking_view``), against a real server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from service.client import (
    AsyncServiceClient,
    BadRequestError,
    BucketClient,
    ConflictError,
    Event,
    LifecycleRule,
    NotFoundError,
    ServiceClient,
    ServiceError,
    Webhook,
)
from service.client import _ops_upkeep as upkeep
from service.client._flow import RetryPolicy
from service.client._sse import Message
from tests.client.dualclient import LoopThread, blocking_view
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[ServiceClient]:
    if request.param == "sync":
        with ServiceClient(server.connection_string, timeout=None) as sync_client:
            yield sync_client
        return
    loop = LoopThread()
    view = blocking_view(lambda: AsyncServiceClient(server.connection_string, timeout=None), loop)
    try:
        yield cast(ServiceClient, view)
    finally:
        view.close()
        loop.stop()


# -- lifecycle ---------------------------------------------------------------------------


def test_lifecycle_rules_round_trip_from_dataclasses_and_dicts(bucket: BucketClient) -> None:
    assert bucket.lifecycle() == []
    stored = bucket.set_lifecycle(
        [
            LifecycleRule("tmp", prefix="tmp/", expire_after_days=0.5),
            {"id": "uploads", "abort_multipart_after_days": 2, "enabled": False},
        ]
    )
    assert stored == [
        LifecycleRule("tmp", prefix="tmp/", expire_after_days=0.5),
        LifecycleRule("uploads", enabled=False, abort_multipart_after_days=2.0),
    ]
    assert bucket.lifecycle() == stored
    bucket.delete_lifecycle()
    assert bucket.lifecycle() == []


def test_a_rule_without_an_action_is_refused_and_changes_nothing(bucket: BucketClient) -> None:
    bucket.set_lifecycle([LifecycleRule("keep", expire_after_days=30)])
    with pytest.raises(BadRequestError) as raised:
        bucket.set_lifecycle([{"id": "nothing"}])
    assert raised.value.status == 400
    assert [rule.id for rule in bucket.lifecycle()] == ["keep"]


def test_run_lifecycle_applies_the_rules_now(client: ServiceClient, bucket: BucketClient) -> None:
    bucket.put("tmp/old.txt", b"old")
    bucket.put("keep/old.txt", b"old")
    bucket.set_lifecycle([LifecycleRule("tmp", prefix="tmp/", expire_after_days=0.00001)])
    time.sleep(1.0)  # 0.00001 days is 0.864 s
    result = client.run_lifecycle()
    assert result.expired >= 1
    assert [obj.key for obj in bucket.list()] == ["keep/old.txt"]


def test_lifecycle_of_a_missing_bucket_is_not_found(client: ServiceClient) -> None:
    with pytest.raises(NotFoundError) as raised:
        client.bucket("no-such-bucket-here").lifecycle()
    assert raised.value.code == "NoSuchBucket"


# -- notifications -----------------------------------------------------------------------


def test_webhooks_round_trip_without_their_secret(bucket: BucketClient) -> None:
    assert bucket.notifications() == []
    hooks = bucket.set_notifications(
        [
            Webhook(
                "ci",
                "http://127.0.0.1:9/hook",
                secret="s3cret",
                events=("object.created",),
                prefix="builds/",
            ),
            {"id": "all", "url": "http://127.0.0.1:9/all", "secret": "other"},
        ]
    )
    assert [(h.id, h.url, h.events, h.prefix) for h in hooks] == [
        ("ci", "http://127.0.0.1:9/hook", ("object.created",), "builds/"),
        ("all", "http://127.0.0.1:9/all", (), ""),
    ]
    assert all(hook.secret is None and hook.status is not None for hook in hooks)
    listed = bucket.notifications()
    assert [hook.id for hook in listed] == ["ci", "all"]
    assert listed[0].status is not None and listed[0].status.delivered == 0
    bucket.delete_notifications()
    assert bucket.notifications() == []


def test_a_webhook_without_a_secret_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="secret"):
        Webhook("x", "http://127.0.0.1:9/").to_json()


def test_a_webhook_with_a_bad_url_is_refused(bucket: BucketClient) -> None:
    with pytest.raises(BadRequestError):
        bucket.set_notifications([{"id": "x", "url": "ftp://host/x", "secret": "s"}])
    assert bucket.notifications() == []


# -- scrub and openapi -------------------------------------------------------------------


def test_scrub_status_and_start(client: ServiceClient) -> None:
    before = client.scrub_status()
    assert before.state in ("idle", "running")
    assert before.objects_checked >= 0 and before.bytes_checked >= 0
    try:
        started = client.start_scrub()
    except ConflictError as error:  # one was already running
        assert error.code == "InvalidState"
    else:
        assert started.state in ("running", "idle")  # a tiny store may finish at once
        assert started.started_at is not None
    deadline = time.monotonic() + 30
    while client.scrub_status().state == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    after = client.scrub_status()
    assert after.state == "idle" and after.finished_at is not None
    assert after.corrupt == []


def test_openapi_document_lists_the_upkeep_paths(client: ServiceClient) -> None:
    paths = client.openapi()["paths"]
    assert "/api/v1/buckets/{bucket}/events" in paths
    assert "/api/v1/system/scrub" in paths


# -- multipart listing -------------------------------------------------------------------


def test_list_multipart_uploads_pages_through_every_session(bucket: BucketClient) -> None:
    ids = [bucket.create_multipart_upload(f"k{index}").upload_id for index in range(5)]
    first = bucket.list_multipart_uploads_page(limit=2)
    assert len(first.uploads) == 2 and first.next_cursor is not None
    every = list(bucket.list_multipart_uploads(page_size=2))
    assert sorted(session.upload_id for session in every) == sorted(ids)
    assert [session.key for session in every] == [f"k{index}" for index in range(5)]


# -- events ------------------------------------------------------------------------------


def take(events: Iterator[Event], count: int) -> list[Event]:
    taken = []
    for event in events:
        taken.append(event)
        if len(taken) == count:
            break
    return taken


def test_events_replay_since_a_sequence_in_order(bucket: BucketClient) -> None:
    bucket.put("a.txt", b"one")
    bucket.put("b.txt", b"two!")
    bucket.delete("a.txt")
    events = take(bucket.events(since=0), 3)
    assert [(e.type, e.key) for e in events] == [
        ("object.created", "a.txt"),
        ("object.created", "b.txt"),
        ("object.deleted", "a.txt"),
    ]
    assert events[1].size_bytes == 4 and events[1].bucket == bucket.name
    assert events[0].sequence < events[1].sequence < events[2].sequence
    later = take(bucket.events(since=events[0].sequence), 1)
    assert later[0].event_id == events[1].event_id


def test_events_stream_live_changes(bucket: BucketClient) -> None:
    timer = threading.Timer(0.5, lambda: bucket.put("live.txt", b"now"))
    timer.start()
    try:
        (event,) = take(bucket.events(), 1)
    finally:
        timer.join()
    assert (event.type, event.key) == ("object.created", "live.txt")


def test_events_of_a_missing_bucket_is_not_found(client: ServiceClient) -> None:
    with pytest.raises(NotFoundError) as raised:
        next(iter(client.bucket("no-such-bucket-here").events()))
    assert raised.value.code == "NoSuchBucket"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_events_resume_across_a_server_restart(
    server_factory: Callable[..., ServerProcess], flavour: str
) -> None:
    """The stream reconnects with Last-Event-ID: nothing missed, nothing repeated."""
    proc = server_factory()
    loop = LoopThread() if flavour == "async" else None
    # Reconnections every 0.1-1 s, up to 40 in a row: a killed server's restart may take tens
    # of seconds on a loaded machine, and the stream must ride all of it out.
    options: dict[str, Any] = {
        "timeout": None,
        "backoff": 0.2,
        "max_backoff": 1.0,
        "part_retries": 40,
    }
    client = (
        ServiceClient(proc.connection_string, **options)
        if loop is None
        else cast(
            ServiceClient,
            blocking_view(lambda: AsyncServiceClient(proc.connection_string, **options), loop),
        )
    )
    try:
        client.buckets.create("restarts")
        bucket = client.bucket("restarts")
        bucket.put("before.txt", b"1")
        received: list[Event] = []
        errors: list[BaseException] = []

        def read() -> None:
            try:
                for event in bucket.events(since=0):
                    received.append(event)
                    if len(received) == 2:
                        return
            except BaseException as error:  # reported below
                errors.append(error)

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.restart(crash=True)
        with ServiceClient(proc.connection_string) as writer:
            writer.bucket("restarts").put("after.txt", b"2")
        reader.join(timeout=60)
        assert errors == [] and not reader.is_alive()
        assert [event.key for event in received] == ["before.txt", "after.txt"]
    finally:
        client.close()
        if loop is not None:
            loop.stop()


# -- pure parts ----------------------------------------------------------------------------


def test_an_error_message_in_the_stream_becomes_the_error_it_names() -> None:
    body = '{"error": {"code": "EventsExpired", "message": "too old", "request_id": "r1"}}'
    with pytest.raises(ServiceError) as raised:
        upkeep.event_from_message(Message(body, "error", None))
    assert raised.value.code == "EventsExpired" and raised.value.status == 410


@pytest.mark.parametrize(
    ("reason", "status", "code"),
    [
        ("access_key_revoked", 401, "Unauthorized"),
        ("token_expired", 401, "Unauthorized"),
        ("user_disabled", 403, "AccountDisabled"),
        ("access_denied", 403, "AccessDenied"),
        ("bucket_deleted", 404, "NoSuchBucket"),
    ],
)
def test_an_end_message_becomes_the_error_a_reconnect_would_get(
    reason: str, status: int, code: str
) -> None:
    body = json.dumps({"reason": reason, "message": "gone"})
    with pytest.raises(ServiceError) as raised:
        upkeep.event_from_message(Message(body, "end", None))
    assert (raised.value.status, raised.value.code) == (status, code)
    assert "gone" in str(raised.value)


def test_reconnect_waits_for_the_servers_retry_else_backs_off() -> None:
    policy = RetryPolicy(backoff=0.5, max_backoff=4.0)
    assert upkeep.reconnect_delay(policy, 0, 1500, 0.3) == 1.5
    assert [upkeep.reconnect_delay(policy, n, None, 1.0) for n in range(5)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        4.0,
    ]
