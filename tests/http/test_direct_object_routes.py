"""Object PUT and DELETE handed from the connection to ``ObjectHandler`` without the
application's routing (``service.app.direct_object_routes``): the same handler, the same
path arguments and the same neighbours' routes as through the rule list, with one serving
process and with two (a worker reads what any process committed).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess


def obj(bucket: str, raw_key: str) -> str:
    """The object path with ``raw_key`` as sent (already percent-encoded where wanted)."""
    return f"/buckets/{bucket}/objects/{raw_key}"


def listed_keys(client: httpx.Client, bucket: str) -> list[str]:
    listed = client.get(f"/buckets/{bucket}/objects")
    assert listed.status_code == 200, listed.text
    return [item["key"] for item in listed.json()["objects"]]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_put_and_delete_decode_the_key_as_the_rule_list_does(
    server_factory: Callable[..., ServerProcess], workers: str
) -> None:
    server = server_factory(SERVICE_WORKERS=workers)
    keys = {
        "plain.txt": "plain.txt",
        "a%2Fb": "a/b",  # an encoded slash is part of the key
        "dir/sub/file": "dir/sub/file",
        quote("naïve café.txt"): "naïve café.txt",
        "q%3Fmark": "q?mark",
    }
    with server.client() as client:
        assert client.post("/buckets", json={"name": "direct"}).status_code == 201
        for raw, key in keys.items():
            body = key.encode() * 3
            stored = client.put(obj("direct", raw), content=body)
            assert stored.status_code == 200, stored.text
            assert stored.json()["key"] == key
            assert stored.headers["X-Request-Id"]
            # another connection, perhaps another process, reads what was answered
            with server.client() as other:
                read = other.get(obj("direct", raw))
                assert read.status_code == 200, read.text
                assert read.content == body
        assert sorted(listed_keys(client, "direct")) == sorted(keys.values())
        for raw, _ in keys.items():
            gone = client.delete(obj("direct", raw))
            assert gone.status_code == 204, gone.text
            with server.client() as other:
                assert_error(other.get(obj("direct", raw)), 404, "NoSuchKey")
        assert listed_keys(client, "direct") == []


def test_a_key_that_is_not_utf8_is_refused_on_put_and_delete(api: httpx.Client) -> None:
    assert api.post("/buckets", json={"name": "direct-utf8"}).status_code == 201
    assert_error(api.put(obj("direct-utf8", "bad%FFkey"), content=b"x"), 400, "InvalidKey")
    assert_error(api.delete(obj("direct-utf8", "bad%FFkey")), 400, "InvalidKey")
    assert listed_keys(api, "direct-utf8") == []


def test_the_lock_routes_keep_their_own_handlers(api: httpx.Client) -> None:
    """``.../retention`` and ``.../legal-hold`` are routes of their own, never objects: on a
    bucket made without object lock they refuse (an object PUT would store the JSON)."""
    assert api.post("/buckets", json={"name": "direct-lock"}).status_code == 201
    assert api.put(obj("direct-lock", "k"), content=b"v").status_code == 200
    for suffix, document in (
        ("retention", {"mode": "governance", "retain_until": "2999-01-01T00:00:00Z"}),
        ("legal-hold", {"status": "on"}),
    ):
        assert_error(api.put(obj("direct-lock", f"k/{suffix}"), json=document), 409, "InvalidState")
    assert listed_keys(api, "direct-lock") == ["k"]


def test_other_methods_on_an_object_still_go_through_the_application(api: httpx.Client) -> None:
    assert api.post("/buckets", json={"name": "direct-405"}).status_code == 201
    refused = api.post(obj("direct-405", "k"), content=b"x")
    assert_error(refused, 405, "MethodNotAllowed")
    assert set(refused.headers["Allow"].replace(" ", "").split(",")) == {
        "GET",
        "HEAD",
        "PUT",
        "DELETE",
    }
