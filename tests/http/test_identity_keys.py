"""Black-box tests of access keys and the bootstrap credentials: secrets shown once, scope,
validation, last use, and what the first start prints and saves.

Accounts and logins come from ``identitykit``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.http.identitykit import KEY_FIELDS, create_account, journal_sequence, login
from tests.http.test_buckets import RFC3339_MS, assert_error
from tests.serverproc import ADMIN_PASSWORD, ServerProcess

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
