"""Black-box tests of users, access keys, login, bearer tokens and bootstrap over HTTP.

The helpers at the top (``Account``, ``create_account``, ``login``) are shared with the other
identity test modules. Failed logins on the shared server are kept few: the per-address
throttle (20 failures from 127.0.0.1) would otherwise lock out every later login of the
session; the throttle itself is tested on fresh servers.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.http.test_buckets import RFC3339_MS, assert_error
from tests.serverproc import ADMIN_PASSWORD, ROOT_ACCESS_KEY, ServerProcess

USER_FIELDS = {"user_id", "username", "role", "status", "created_at", "updated_at"}
KEY_FIELDS = {"access_key_id", "user_id", "name", "status", "created_at", "last_used_at"}


@dataclass(frozen=True)
class Account:
    """A user made through the API, with its password and one access key."""

    user_id: str
    username: str
    password: str
    access_key: str
    secret_key: str

    @property
    def auth(self) -> tuple[str, str]:
        return (self.access_key, self.secret_key)

    def client(self, server: ServerProcess) -> httpx.Client:
        """A client authenticated with this account's access key."""
        return httpx.Client(base_url=server.api, auth=self.auth, timeout=30.0)


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def create_account(api: httpx.Client, role: str = "user", prefix: str = "user") -> Account:
    """Create a user (as ``api``'s caller, an admin) and an access key for it."""
    username, password = unique(prefix), "pw-" + secrets.token_urlsafe(12)
    created = api.post("/users", json={"username": username, "password": password, "role": role})
    assert created.status_code == 201, created.text
    user_id = created.json()["user_id"]
    key = api.post("/access-keys", json={"user_id": user_id, "name": "tests"})
    assert key.status_code == 201, key.text
    return Account(
        user_id, username, password, key.json()["access_key_id"], key.json()["secret_key"]
    )


def login(server: ServerProcess, username: str, password: str) -> httpx.Response:
    return httpx.post(
        server.api + "/auth/login", json={"username": username, "password": password}, timeout=30
    )


def token_of(server: ServerProcess, account: Account) -> str:
    response = login(server, account.username, account.password)
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def bearer(server: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.api, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
    )


def anonymous(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.api, timeout=30.0)


def assert_unauthorized(response: httpx.Response) -> None:
    """401 Unauthorized with the contract's challenge: a failed login and a request that
    carried a Bearer token are offered Bearer only (no browser credentials dialog), the rest
    both schemes."""
    assert_error(response, 401, "Unauthorized")
    challenge = response.headers.get("WWW-Authenticate", "")
    sent = response.request.headers.get("Authorization", "")
    if response.request.url.path.endswith("/auth/login") or sent.lower().startswith("bearer"):
        assert challenge.startswith("Bearer") and "Basic" not in challenge, challenge
    else:
        assert "Basic" in challenge and "Bearer" in challenge


def journal_sequence(api: httpx.Client) -> int:
    info = api.get("/system/info")
    assert info.status_code == 200, info.text
    return int(info.json()["journal"]["last_sequence"])


# -- login and bearer tokens ----------------------------------------------------------------


def test_login_returns_an_expiring_token_that_authenticates(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    before = time.time()
    response = login(server, account.username, account.password)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"token", "expires_at", "user"}
    assert set(body["user"]) == USER_FIELDS
    assert body["user"]["user_id"] == account.user_id and body["user"]["role"] == "user"
    assert RFC3339_MS.match(body["expires_at"])
    expires = time.mktime(time.strptime(body["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
    expires -= time.timezone  # strptime read UTC as local time
    assert before + 12 * 3600 - 5 <= expires <= time.time() + 12 * 3600 + 5
    with bearer(server, body["token"]) as client:
        me = client.get(f"/users/{account.user_id}")
        assert me.status_code == 200 and me.json()["username"] == account.username
        assert client.post("/buckets", json={"name": unique("tok")}).status_code == 201


def test_wrong_password_and_unknown_user_get_the_same_401(server: ServerProcess) -> None:
    wrong = login(server, "admin", "not-the-admin-password")
    unknown = login(server, unique("nobody"), "whatever-password")
    assert_unauthorized(wrong)
    assert_unauthorized(unknown)
    assert wrong.json()["error"]["message"] == unknown.json()["error"]["message"]
    assert "token" not in wrong.text


def test_login_requires_username_and_password_strings(server: ServerProcess) -> None:
    response = httpx.post(server.api + "/auth/login", json={"username": "admin"})
    assert_error(response, 400, "InvalidArgument")
    response = httpx.post(server.api + "/auth/login", json={"username": 1, "password": "x" * 9})
    assert_error(response, 400, "InvalidArgument")


def test_bootstrap_admin_logs_in_with_the_configured_password(server: ServerProcess) -> None:
    response = login(server, "admin", ADMIN_PASSWORD)
    assert response.status_code == 200, response.text
    assert response.json()["user"]["role"] == "admin"


def test_tokens_expire_after_the_configured_ttl(
    server_factory: Callable[..., ServerProcess],
) -> None:
    # Long enough that a loaded machine still uses the token before it expires; the second
    # request waits for the expiry the login reported.
    proc = server_factory(SERVICE_TOKEN_TTL="4")
    response = login(proc, "admin", proc.admin_password)
    assert response.status_code == 200, response.text
    expires_at = datetime.fromisoformat(response.json()["expires_at"].replace("Z", "+00:00"))
    with bearer(proc, response.json()["token"]) as client:
        assert client.get("/buckets").status_code == 200
        time.sleep(max(0.0, expires_at.timestamp() - time.time()) + 0.3)
        assert_unauthorized(client.get("/buckets"))


def test_token_issued_before_a_password_change_is_refused(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    old_token, other_old_token = token_of(server, account), token_of(server, account)
    new_password = "new-" + secrets.token_urlsafe(12)
    with bearer(server, old_token) as client:
        changed = client.patch(f"/users/{account.user_id}", json={"password": new_password})
        assert changed.status_code == 200, changed.text
        assert_unauthorized(client.get("/buckets"))
    with bearer(server, other_old_token) as client:
        assert_unauthorized(client.get("/buckets"))
    assert_unauthorized(login(server, account.username, account.password))
    fresh = login(server, account.username, new_password)
    assert fresh.status_code == 200, fresh.text
    with bearer(server, fresh.json()["token"]) as client:
        assert client.get("/buckets").status_code == 200
    with account.client(server) as client:  # access keys are not sessions: they keep working
        assert client.get("/buckets").status_code == 200


def test_altered_or_garbage_tokens_are_unauthorized(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    token = token_of(server, account)
    altered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for candidate in (altered, "garbage", token + "x"):
        with bearer(server, candidate) as client:
            assert_unauthorized(client.get("/buckets"))


# -- 401 and 403 on credentials -------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/buckets"),
        ("POST", "/buckets"),
        ("GET", "/buckets/some-bucket/objects/a.txt"),
        ("PUT", "/buckets/some-bucket/objects/a.txt"),
        ("GET", "/users"),
        ("GET", "/access-keys"),
        ("POST", "/presign"),
        ("GET", "/system/info"),
        ("POST", "/multipart/init"),
    ],
)
def test_requests_without_credentials_get_401_with_a_challenge(
    server: ServerProcess, method: str, path: str
) -> None:
    with anonymous(server) as client:
        response = client.request(
            method, path, content=b"{}" if method in ("POST", "PUT") else None
        )
    assert_unauthorized(response)


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_a_refused_object_request_keeps_the_connection_usable(
    server: ServerProcess, method: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, "/api/v1/buckets/some-bucket/objects/a.txt")
        refused = connection.getresponse()
        refused.read()
        assert refused.status == 401
        connection.request("GET", "/health")  # on the same connection
        assert connection.getresponse().status == 200
    finally:
        connection.close()


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic",
        "Basic !!!!",
        "Digest abc",
        "Bearer",
        "Basic " + "QQ==" * 3000,
    ],
)
def test_malformed_authorization_headers_are_unauthorized(
    server: ServerProcess, authorization: str
) -> None:
    with anonymous(server) as client:
        assert_unauthorized(client.get("/buckets", headers={"Authorization": authorization}))


def test_wrong_secret_and_unknown_key_are_unauthorized(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.api, auth=(ROOT_ACCESS_KEY, "sk_wrong-secret-123")) as c:
        assert_unauthorized(c.get("/buckets"))
    with httpx.Client(base_url=server.api, auth=("bk_UNKNOWNKEY", server.secret_key)) as c:
        assert_unauthorized(c.get("/buckets"))
    with httpx.Client(base_url=server.api, auth=("admin", ADMIN_PASSWORD)) as c:
        assert_unauthorized(c.get("/buckets"))  # Basic carries access keys, not passwords


def test_revoked_key_is_refused_at_once_and_can_be_reactivated(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    with account.client(server) as client:
        assert client.get("/buckets").status_code == 200
        revoked = api.patch(f"/access-keys/{account.access_key}", json={"status": "revoked"})
        assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
        assert_unauthorized(client.get("/buckets"))
        assert (
            api.patch(f"/access-keys/{account.access_key}", json={"status": "active"}).json()[
                "status"
            ]
            == "active"
        )
        assert client.get("/buckets").status_code == 200
        assert api.delete(f"/access-keys/{account.access_key}").status_code == 204
        assert_unauthorized(client.get("/buckets"))
    assert_error(api.get(f"/access-keys/{account.access_key}"), 404, "NoSuchAccessKey")


def test_disabled_user_is_refused_on_key_token_and_login_at_once(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    token = token_of(server, account)
    disabled = api.patch(f"/users/{account.user_id}", json={"status": "disabled"})
    assert disabled.status_code == 200 and disabled.json()["status"] == "disabled"
    with account.client(server) as client:
        assert_error(client.get("/buckets"), 403, "AccountDisabled")
    with bearer(server, token) as client:
        assert_error(client.get("/buckets"), 403, "AccountDisabled")
    assert_error(login(server, account.username, account.password), 403, "AccountDisabled")
    enabled = api.patch(f"/users/{account.user_id}", json={"status": "active"})
    assert enabled.status_code == 200 and enabled.json()["status"] == "active"
    with account.client(server) as client:
        assert client.get("/buckets").status_code == 200
    with bearer(server, token) as client:  # issued before the account changed
        assert_unauthorized(client.get("/buckets"))
    assert login(server, account.username, account.password).status_code == 200


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


# -- access keys ------------------------------------------------------------------------------


def test_secret_is_returned_once_and_never_listed(server: ServerProcess, api: httpx.Client) -> None:
    account = create_account(api)
    created = api.post("/access-keys", json={"user_id": account.user_id, "name": "laptop"})
    assert created.status_code == 201
    key = created.json()
    assert set(key) == KEY_FIELDS | {"secret_key"}
    assert key["access_key_id"].startswith("bk_") and key["secret_key"].startswith("sk_")
    assert key["user_id"] == account.user_id and key["name"] == "laptop"
    assert key["status"] == "active" and key["last_used_at"] is None
    assert len(key["secret_key"]) >= 3 + 27  # >= 160 bits of base64url
    reads = [
        api.get(f"/access-keys/{key['access_key_id']}"),
        api.get("/access-keys"),
        api.get("/access-keys", params={"user_id": account.user_id}),
        api.patch(f"/access-keys/{key['access_key_id']}", json={"status": "active"}),
    ]
    with account.client(server) as client:
        reads.append(client.get("/access-keys"))
    for response in reads:
        assert response.status_code == 200, response.text
        assert key["secret_key"] not in response.text and "secret" not in response.text
    single = reads[0].json()
    assert set(single) == KEY_FIELDS
    listed = reads[2].json()["access_keys"]
    assert [entry["access_key_id"] for entry in listed] == [
        account.access_key,
        key["access_key_id"],
    ]
    assert all(set(entry) == KEY_FIELDS for entry in listed)


def test_a_user_creates_and_lists_only_its_own_keys(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    with account.client(server) as client:
        created = client.post("/access-keys", json={"name": "mine"})
        assert created.status_code == 201 and created.json()["user_id"] == account.user_id
        listed = client.get("/access-keys").json()["access_keys"]
        assert {entry["user_id"] for entry in listed} == {account.user_id}
        assert len(listed) == 2
    new_key = created.json()
    with httpx.Client(
        base_url=server.api, auth=(new_key["access_key_id"], new_key["secret_key"])
    ) as c:
        assert c.get(f"/users/{account.user_id}").json()["username"] == account.username


def test_access_key_requests_validate_their_input(api: httpx.Client) -> None:
    account = create_account(api)
    path = f"/access-keys/{account.access_key}"
    for body in ({"status": "deleted"}, {}, {"status": "active", "name": "x"}):
        assert_error(api.patch(path, json=body), 400, "InvalidArgument")
    assert_error(api.post("/access-keys", json={"name": "x" * 129}), 400, "InvalidArgument")
    assert_error(api.post("/access-keys", json={"user_id": 5}), 400, "InvalidArgument")
    assert_error(api.post("/access-keys", json={"user_id": "u_missing"}), 404, "NoSuchUser")
    assert_error(
        api.patch("/access-keys/bk_missing", json={"status": "revoked"}), 404, "NoSuchAccessKey"
    )


def test_last_used_at_is_kept_in_memory_without_a_journal_write_per_request(
    server: ServerProcess, api: httpx.Client
) -> None:
    account = create_account(api)
    assert api.get(f"/access-keys/{account.access_key}").json()["last_used_at"] is None
    before_use = time.time()
    with account.client(server) as client:
        assert client.get("/buckets").status_code == 200
        sequence = journal_sequence(api)
        for _ in range(30):
            assert client.get("/buckets").status_code == 200
    # At most the periodic (60 s) AccessKeysUsed batch may have landed in between.
    assert journal_sequence(api) - sequence <= 1
    last_used = api.get(f"/access-keys/{account.access_key}").json()["last_used_at"]
    assert last_used is not None and RFC3339_MS.match(last_used)
    moment = time.mktime(time.strptime(last_used[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before_use - 1 <= moment <= time.time() + 1
    listed = api.get("/access-keys", params={"user_id": account.user_id}).json()["access_keys"]
    assert listed[0]["last_used_at"] == last_used


# -- bootstrap --------------------------------------------------------------------------------


def test_bootstrap_with_credentials_from_the_environment_writes_no_secrets(
    server: ServerProcess, api: httpx.Client
) -> None:
    path = server.data_dir / "credentials.json"
    if path.exists():  # nothing was generated, so nothing secret may be in it
        text = path.read_text()
        assert server.secret_key not in text and ADMIN_PASSWORD not in text
    keys = api.get("/access-keys").json()["access_keys"]
    root = [key for key in keys if key["access_key_id"] == server.access_key]
    assert len(root) == 1
    admin = api.get(f"/users/{root[0]['user_id']}").json()
    assert admin["username"] == "admin" and admin["role"] == "admin"
    assert server.secret_key not in server.logs() and ADMIN_PASSWORD not in server.logs()


PRINTED = re.compile(
    r"access key: (?P<key>bk_\S+)\s+secret key: (?P<secret>sk_\S+)\s+admin password: (?P<pw>\S+)"
)


def test_generated_bootstrap_credentials_are_saved_privately_and_printed_once(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(
        SERVICE_ROOT_ACCESS_KEY="", SERVICE_ROOT_SECRET_KEY="", SERVICE_ADMIN_PASSWORD=""
    )
    match = PRINTED.search(proc.logs())
    assert match is not None, proc.logs()
    key, secret, password = match["key"], match["secret"], match["pw"]
    path = proc.data_dir / "credentials.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    saved: dict[str, Any] = json.loads(path.read_text())
    assert saved["access_key_id"] == key and saved["secret_key"] == secret
    assert saved["admin_password"] == password and saved["username"] == "admin"
    with httpx.Client(base_url=proc.api, auth=(key, secret)) as client:
        assert client.get("/users").status_code == 200
    assert login(proc, "admin", password).status_code == 200
    proc.restart()
    assert proc.logs().count(secret) == 1 and proc.logs().count(password) == 1
    with httpx.Client(base_url=proc.api, auth=(key, secret)) as client:
        assert client.get("/users").status_code == 200
    assert len(client_users(proc, key, secret)) == 1  # no second admin at the second start


def client_users(proc: ServerProcess, key: str, secret: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=proc.api, auth=(key, secret)) as client:
        return list(client.get("/users").json()["users"])


def test_generated_key_with_a_chosen_password_saves_only_the_key(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory(SERVICE_ROOT_ACCESS_KEY="", SERVICE_ROOT_SECRET_KEY="")
    saved = json.loads((proc.data_dir / "credentials.json").read_text())
    assert "admin_password" not in saved and proc.admin_password not in proc.logs()
    assert saved["secret_key"] in proc.logs()
    assert len(client_users(proc, saved["access_key_id"], saved["secret_key"])) == 1


# -- login throttling -------------------------------------------------------------------------


def test_failed_logins_lock_out_the_username_with_retry_after(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory()
    for _ in range(5):
        assert_unauthorized(login(proc, "admin", "wrong-password-1"))
    locked = login(proc, "admin", proc.admin_password)  # the right password, but locked out
    assert_unauthorized(locked)
    retry_after = int(locked.headers["Retry-After"])
    assert 1 <= retry_after <= 2
    with proc.client() as api:
        other = create_account(api)
    assert login(proc, other.username, other.password).status_code == 200  # only that name
    time.sleep(retry_after)
    assert login(proc, "admin", proc.admin_password).status_code == 200


def test_failed_logins_lock_out_the_client_address(
    server_factory: Callable[..., ServerProcess],
) -> None:
    proc = server_factory()
    with ThreadPoolExecutor(4) as pool:  # 20 names, each failing once: only the address adds up
        failures = list(pool.map(lambda n: login(proc, f"guess-{n}", "wrong-pw-1"), range(20)))
    for failure in failures:
        assert_unauthorized(failure)
    locked = login(proc, "admin", proc.admin_password)
    assert_unauthorized(locked)
    assert int(locked.headers["Retry-After"]) >= 1
    with proc.client() as api:  # access keys are not throttled
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
