"""Black-box tests of ownership: a ``user`` reaches only its own buckets, keys and self.

Bob owns a bucket holding an object and an open multipart upload; Alice, another ``user``,
is refused with 403 AccessDenied on every kind of endpoint that touches them, and each
refusal is checked to have changed nothing. An admin reaches everything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.http.identitykit import Account, bearer, create_account, login, token_of, unique
from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

OBJECT_BODY = b"bob's private bytes"


@dataclass(frozen=True)
class Holdings:
    """What Bob owns: a bucket, an object in it, and an open multipart upload."""

    bob: Account
    bucket: str
    key: str
    upload_id: str

    @property
    def object_path(self) -> str:
        return f"/buckets/{self.bucket}/objects/{self.key}"


@pytest.fixture(scope="module")
def alice(server: ServerProcess) -> Account:
    with server.client() as api:
        return create_account(api, prefix="alice")


@pytest.fixture(scope="module")
def holdings(server: ServerProcess) -> Holdings:
    with server.client() as api:
        bob = create_account(api, prefix="bob")
    bucket = unique("bobs")
    with bob.client(server) as client:
        assert client.post("/buckets", json={"name": bucket}).status_code == 201
        put = client.put(f"/buckets/{bucket}/objects/secret.txt", content=OBJECT_BODY)
        assert put.status_code == 200, put.text
        init = client.post("/multipart/init", json={"bucket": bucket, "key": "big.bin"})
        assert init.status_code == 201, init.text
        part = client.put(
            f"/multipart/{init.json()['upload_id']}/part", params={"partNumber": 1}, content=b"p1"
        )
        assert part.status_code == 200, part.text
    return Holdings(bob, bucket, "secret.txt", init.json()["upload_id"])


@pytest.fixture
def as_alice(server: ServerProcess, alice: Account) -> Iterator[httpx.Client]:
    with alice.client(server) as client:
        yield client


@pytest.fixture
def as_bob(server: ServerProcess, holdings: Holdings) -> Iterator[httpx.Client]:
    with holdings.bob.client(server) as client:
        yield client


def assert_bobs_things_are_intact(client: httpx.Client, holdings: Holdings) -> None:
    bucket = client.get(f"/buckets/{holdings.bucket}")
    assert bucket.status_code == 200 and bucket.json()["tags"] == {}
    assert bucket.json()["quota_bytes"] is None
    assert client.get(holdings.object_path).content == OBJECT_BODY
    upload = client.get(f"/multipart/{holdings.upload_id}")
    assert upload.status_code == 200
    parts = [(part["part_number"], part["etag"]) for part in upload.json()["parts"]]
    assert parts == [(1, hashlib.sha256(b"p1").hexdigest())]
    uploads = client.get("/multipart", params={"bucket": holdings.bucket}).json()["uploads"]
    assert [upload["key"] for upload in uploads] == ["big.bin"]


def denied_requests(holdings: Holdings) -> list[tuple[str, str, dict[str, object]]]:
    """(method, path, httpx keyword arguments) for every endpoint touching Bob's things."""
    b, obj, upload = holdings.bucket, holdings.object_path, holdings.upload_id
    return [
        ("GET", obj, {}),
        ("PUT", obj, {"content": b"overwrite"}),
        ("PUT", f"/buckets/{b}/objects/new.txt", {"content": b"new"}),
        ("DELETE", obj, {}),
        ("GET", f"/buckets/{b}/objects", {}),
        ("GET", f"/buckets/{b}/versions", {}),
        ("GET", f"/buckets/{b}", {}),
        ("PATCH", f"/buckets/{b}", {"json": {"tags": {"owned": "by-alice"}}}),
        ("PATCH", f"/buckets/{b}", {"json": {"quota_bytes": 1}}),
        ("DELETE", f"/buckets/{b}", {"params": {"force": "true"}}),
        ("POST", "/multipart/init", {"json": {"bucket": b, "key": "alice.bin"}}),
        ("PUT", f"/multipart/{upload}/part", {"params": {"partNumber": 2}, "content": b"p2"}),
        ("PUT", f"/multipart/{upload}/part", {"params": {"partNumber": 1}, "content": b"xx"}),
        ("GET", f"/multipart/{upload}", {}),
        ("POST", f"/multipart/{upload}/complete", {"json": {"parts": []}}),
        ("DELETE", f"/multipart/{upload}", {}),
        ("GET", "/multipart", {"params": {"bucket": b}}),
        ("POST", "/presign", {"json": {"bucket": b, "key": holdings.key, "method": "GET"}}),
        ("POST", "/presign", {"json": {"bucket": b, "key": "new.txt", "method": "PUT"}}),
        ("POST", "/presign", {"json": {"bucket": b, "key": holdings.key, "method": "HEAD"}}),
    ]


def test_a_user_is_denied_every_endpoint_of_another_users_bucket(
    as_alice: httpx.Client, as_bob: httpx.Client, holdings: Holdings
) -> None:
    for method, path, options in denied_requests(holdings):
        response = as_alice.request(method, path, **options)  # type: ignore[arg-type]
        assert_error(response, 403, "AccessDenied")
    head = as_alice.head(holdings.object_path)
    assert head.status_code == 403 and head.content == b""
    assert_bobs_things_are_intact(as_bob, holdings)
    assert as_bob.get(f"/buckets/{holdings.bucket}/objects/new.txt").status_code == 404


def test_a_user_is_denied_by_bearer_token_too(
    server: ServerProcess, alice: Account, as_bob: httpx.Client, holdings: Holdings
) -> None:
    with bearer(server, token_of(server, alice)) as client:
        assert_error(client.get(holdings.object_path), 403, "AccessDenied")
        assert_error(client.delete(holdings.object_path), 403, "AccessDenied")
        assert_error(client.get(f"/multipart/{holdings.upload_id}"), 403, "AccessDenied")
    assert_bobs_things_are_intact(as_bob, holdings)


def test_an_admin_reaches_every_users_bucket(api: httpx.Client, holdings: Holdings) -> None:
    assert_bobs_things_are_intact(api, holdings)
    listed = api.get(f"/buckets/{holdings.bucket}/objects").json()["objects"]
    assert [entry["key"] for entry in listed] == [holdings.key]
    presign = api.post(
        "/presign", json={"bucket": holdings.bucket, "key": holdings.key, "method": "GET"}
    )
    assert presign.status_code == 200, presign.text
    assert httpx.get(presign.json()["url"]).content == OBJECT_BODY
    assert holdings.bucket in [bucket["name"] for bucket in api.get("/buckets").json()["buckets"]]


def test_a_user_lists_only_its_own_buckets_and_owns_what_it_creates(
    as_alice: httpx.Client, alice: Account, holdings: Holdings
) -> None:
    mine = unique("alices")
    created = as_alice.post("/buckets", json={"name": mine})
    assert created.status_code == 201 and created.json()["owner"] == alice.user_id
    listed = as_alice.get("/buckets")
    assert listed.status_code == 200
    assert [bucket["name"] for bucket in listed.json()["buckets"]] == [mine]
    assert as_alice.put(f"/buckets/{mine}/objects/a.txt", content=b"a").status_code == 200
    assert as_alice.get(f"/buckets/{mine}/objects/a.txt").content == b"a"
    assert as_alice.post("/presign", json={"bucket": mine, "key": "a.txt"}).status_code == 200
    init = as_alice.post("/multipart/init", json={"bucket": mine, "key": "m.bin"})
    assert init.status_code == 201 and init.json()["bucket"] == mine
    assert as_alice.delete(f"/multipart/{init.json()['upload_id']}").status_code == 204
    assert as_alice.delete(f"/buckets/{mine}", params={"force": "true"}).status_code == 204


def test_a_user_cannot_list_create_or_delete_users(
    as_alice: httpx.Client, holdings: Holdings, api: httpx.Client
) -> None:
    assert_error(as_alice.get("/users"), 403, "AccessDenied")
    name = unique("made-by-alice")
    created = as_alice.post("/users", json={"username": name, "password": "long-enough-pw"})
    assert_error(created, 403, "AccessDenied")
    assert name not in [user["username"] for user in api.get("/users").json()["users"]]
    assert_error(as_alice.get(f"/users/{holdings.bob.user_id}"), 403, "AccessDenied")
    assert_error(as_alice.delete(f"/users/{holdings.bob.user_id}"), 403, "AccessDenied")
    assert_error(
        as_alice.patch(f"/users/{holdings.bob.user_id}", json={"password": "hijacked-pw"}),
        403,
        "AccessDenied",
    )
    assert api.get(f"/users/{holdings.bob.user_id}").json()["status"] == "active"
    assert_error(as_alice.get("/system/info"), 403, "AccessDenied")


def test_a_user_cannot_change_its_own_role_or_status(
    as_alice: httpx.Client, alice: Account, api: httpx.Client
) -> None:
    path = f"/users/{alice.user_id}"
    for body in ({"role": "admin"}, {"status": "disabled"}, {"role": "admin", "password": "x" * 9}):
        assert_error(as_alice.patch(path, json=body), 403, "AccessDenied")
    me = api.get(path).json()
    assert me["role"] == "user" and me["status"] == "active"
    same = as_alice.patch(path, json={"role": "user", "status": "active"})  # no change: allowed
    assert same.status_code == 200 and same.json() == me
    assert as_alice.get(path).json() == me


def test_a_user_changes_its_own_password(server: ServerProcess, api: httpx.Client) -> None:
    carol = create_account(api, prefix="carol")
    new_password = "carols-new-password"
    with carol.client(server) as client:
        changed = client.patch(f"/users/{carol.user_id}", json={"password": new_password})
    assert changed.status_code == 200, changed.text
    assert "password" not in changed.text
    assert login(server, carol.username, new_password).status_code == 200


def test_a_user_cannot_see_or_touch_another_users_keys(
    server: ServerProcess, as_alice: httpx.Client, alice: Account, holdings: Holdings
) -> None:
    bob = holdings.bob
    listed = as_alice.get("/access-keys")
    assert listed.status_code == 200
    assert {key["user_id"] for key in listed.json()["access_keys"]} == {alice.user_id}
    assert bob.access_key not in listed.text
    assert_error(as_alice.get("/access-keys", params={"user_id": bob.user_id}), 403, "AccessDenied")
    for method, options in (
        ("GET", {}),
        ("PATCH", {"json": {"status": "revoked"}}),
        ("DELETE", {}),
    ):
        response = as_alice.request(method, f"/access-keys/{bob.access_key}", **options)  # type: ignore[arg-type]
        assert_error(response, 403, "AccessDenied")
    assert_error(as_alice.post("/access-keys", json={"user_id": bob.user_id}), 403, "AccessDenied")
    with bob.client(server) as client:  # Bob's key still works and Bob still has just one
        keys = client.get("/access-keys")
        assert keys.status_code == 200 and len(keys.json()["access_keys"]) == 1
