"""Black-box tests of users: create, read, update, delete, validation, the last admin, restarts.

Accounts and logins come from ``identitykit``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import httpx

from tests.http.identitykit import (
    USER_FIELDS,
    assert_unauthorized,
    bearer,
    create_account,
    login,
    unique,
)
from tests.http.test_buckets import RFC3339_MS, assert_error
from tests.serverproc import ServerProcess

# -- users ------------------------------------------------------------------------------------


def test_admin_creates_reads_updates_and_deletes_a_user(
    server: ServerProcess, api: httpx.Client
) -> None:
    username = unique("crud")
    created = api.post("/users", json={"username": username, "password": "long-enough-pw"})
    assert created.status_code == 201, created.text
    user = created.json()
    assert set(user) == USER_FIELDS
    assert user["username"] == username and user["role"] == "user" and user["status"] == "active"
    assert RFC3339_MS.match(user["created_at"]) and user["user_id"].startswith("u_")
    assert api.get(f"/users/{user['user_id']}").json() == user
    listed = api.get("/users").json()["users"]
    assert user in listed and all(set(entry) == USER_FIELDS for entry in listed)
    promoted = api.patch(f"/users/{user['user_id']}", json={"role": "admin"})
    assert promoted.status_code == 200 and promoted.json()["role"] == "admin"
    assert promoted.json()["updated_at"] >= user["updated_at"]
    key = api.post("/access-keys", json={"user_id": user["user_id"]}).json()
    assert api.delete(f"/users/{user['user_id']}").status_code == 204
    assert_error(api.get(f"/users/{user['user_id']}"), 404, "NoSuchUser")
    assert_error(api.delete(f"/users/{user['user_id']}"), 404, "NoSuchUser")
    with httpx.Client(base_url=server.api, auth=(key["access_key_id"], key["secret_key"])) as c:
        assert_unauthorized(c.get("/buckets"))  # the user's keys went with it
    assert_unauthorized(login(server, username, "long-enough-pw"))


def test_user_creation_validates_its_input(api: httpx.Client) -> None:
    username = unique("dup")
    assert (
        api.post("/users", json={"username": username, "password": "long-enough-pw"}).status_code
        == 201
    )
    assert_error(
        api.post("/users", json={"username": username, "password": "long-enough-pw"}),
        409,
        "UserAlreadyExists",
    )
    for body in (
        {"username": unique("short"), "password": "short"},
        {"username": unique("role"), "password": "long-enough-pw", "role": "root"},
        {"username": "a b", "password": "long-enough-pw"},
        {"username": unique("nopw")},
        {"password": "long-enough-pw"},
    ):
        assert_error(api.post("/users", json=body), 400, "InvalidArgument")


def test_user_updates_validate_their_input(api: httpx.Client) -> None:
    account = create_account(api)
    for body in ({"status": "gone"}, {"role": "root"}, {"password": "short"}, {"nick": "x"}):
        assert_error(api.patch(f"/users/{account.user_id}", json=body), 400, "InvalidArgument")
    assert_error(api.patch("/users/u_missing", json={"role": "user"}), 404, "NoSuchUser")


def test_the_last_active_admin_cannot_be_disabled_demoted_or_deleted(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory()
    with proc.client() as api:
        admin = api.get("/users").json()["users"][0]
        assert admin["username"] == "admin"
        for body in ({"status": "disabled"}, {"role": "user"}):
            assert_error(api.patch(f"/users/{admin['user_id']}", json=body), 409, "InvalidState")
        assert_error(api.delete(f"/users/{admin['user_id']}"), 409, "InvalidState")
        other = create_account(api, role="admin", prefix="admin2")
        demoted = api.patch(f"/users/{admin['user_id']}", json={"role": "user"})
        assert demoted.status_code == 200 and demoted.json()["role"] == "user"
    with other.client(proc) as api:
        assert_error(
            api.patch(f"/users/{other.user_id}", json={"status": "disabled"}), 409, "InvalidState"
        )
        assert api.get("/users").status_code == 200


# -- durability -------------------------------------------------------------------------------


def test_users_keys_and_statuses_survive_restarts_and_crashes(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory()
    with proc.client() as api:
        kept = create_account(api, prefix="kept")
        disabled = create_account(api, prefix="disabled")
        revoked = create_account(api, prefix="revoked")
        assert (
            api.patch(f"/users/{disabled.user_id}", json={"status": "disabled"}).status_code == 200
        )
        assert (
            api.patch(f"/access-keys/{revoked.access_key}", json={"status": "revoked"}).status_code
            == 200
        )
        new_password = "changed-" + secrets.token_urlsafe(8)
        assert (
            api.patch(f"/users/{kept.user_id}", json={"password": new_password}).status_code == 200
        )
        users_before = api.get("/users").json()["users"]
        keys_before = api.get("/access-keys").json()["access_keys"]
    token = login(proc, kept.username, new_password).json()["token"]
    for crash in (False, True):
        proc.restart(crash=crash)
        with proc.client() as api:
            assert api.get("/users").json()["users"] == users_before
            keys_after = api.get("/access-keys").json()["access_keys"]
            strip = [{k: v for k, v in key.items() if k != "last_used_at"} for key in keys_after]
            assert strip == [
                {k: v for k, v in key.items() if k != "last_used_at"} for key in keys_before
            ]
        with kept.client(proc) as client:
            assert client.get("/buckets").status_code == 200
        with bearer(proc, token) as client:
            assert client.get("/buckets").status_code == 200
        with disabled.client(proc) as client:
            assert_error(client.get("/buckets"), 403, "AccountDisabled")
        with revoked.client(proc) as client:
            assert_unauthorized(client.get("/buckets"))
        assert login(proc, kept.username, new_password).status_code == 200
