"""Unit tests of ``plan_read``: what a GET or HEAD of a version answers (pure logic)."""

from __future__ import annotations

import pytest

from service.common.api_errors import ApiError
from service.common.timefmt import http_date
from service.http.conditions import ByteWindow
from service.http.read_plan import plan_read
from service.meta import ObjectVersion

SHA = "ab" * 32
VERSION = ObjectVersion(
    bucket="b",
    key="k",
    version_id="v1",
    payload_id="p1",
    size=10,
    content_type="text/plain",
    sha256=SHA,
    custom_metadata={"colour": "blue"},
    created_at=1_795_336_904_000,
    updated_at=1_795_336_904_123,
)


def test_a_plain_get_sends_the_whole_body_with_every_contract_header() -> None:
    plan = plan_read(VERSION, {}, head=False)
    assert (plan.status, plan.window) == (200, ByteWindow(0, 10))
    assert dict(plan.headers) == {
        "Content-Type": "text/plain",
        "ETag": f'"{SHA}"',
        "X-Checksum-Sha256": SHA,
        "Last-Modified": http_date(VERSION.updated_at),
        "Accept-Ranges": "bytes",
        "X-Version-Id": "v1",
        "X-Meta-colour": "blue",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
        "Content-Length": "10",
    }


def test_head_declares_the_length_but_sends_nothing() -> None:
    plan = plan_read(VERSION, {}, head=True)
    assert plan.status == 200 and plan.window.length == 0
    assert ("Content-Length", "10") in plan.headers


def test_a_range_answers_206_with_its_window() -> None:
    plan = plan_read(VERSION, {"Range": "bytes=2-4"}, head=False)
    assert (plan.status, plan.window) == (206, ByteWindow(2, 5))
    assert ("Content-Range", "bytes 2-4/10") in plan.headers
    assert ("Content-Length", "3") in plan.headers


def test_a_stale_if_range_sends_the_whole_body() -> None:
    plan = plan_read(VERSION, {"Range": "bytes=2-4", "If-Range": '"other"'}, head=False)
    assert (plan.status, plan.window) == (200, ByteWindow(0, 10))


def test_an_unsatisfiable_range_is_416_with_the_size() -> None:
    with pytest.raises(ApiError) as raised:
        plan_read(VERSION, {"Range": "bytes=10-"}, head=False)
    assert raised.value.status == 416
    assert raised.value.headers == {"Content-Range": "bytes */10"}


def test_a_matching_if_none_match_is_304_without_body_or_content_type() -> None:
    plan = plan_read(VERSION, {"If-None-Match": f'"{SHA}"'}, head=False)
    assert plan.status == 304 and plan.window.length == 0
    names = [name for name, _ in plan.headers]
    assert "Content-Type" not in names and "Content-Length" not in names
    assert ("ETag", f'"{SHA}"') in plan.headers


def test_a_failed_if_match_is_412() -> None:
    with pytest.raises(ApiError) as raised:
        plan_read(VERSION, {"If-Match": '"other"'}, head=False)
    assert (raised.value.status, raised.value.code) == (412, "PreconditionFailed")
