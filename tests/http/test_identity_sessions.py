"""Black-box tests of login and bearer tokens: expiry, password changes, tampering, throttling.

Accounts and logins come from ``identitykit``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx

from tests.http.identitykit import (
    USER_FIELDS,
    assert_unauthorized,
    bearer,
    create_account,
    login,
    token_of,
    unique,
)
from tests.http.test_buckets import RFC3339_MS, assert_error
from tests.serverproc import ADMIN_PASSWORD, ServerProcess

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
    # The 20th failure locks the address for 1 s, and each failure after a lockout doubles
    # the next; a loaded machine may take longer than 1 s to send the next login, so the
    # lockout is grown to 8 s (probing from fresh names) before the admin's login is tried.
    retry_after, probes = 0, 0
    while retry_after < 9 and probes < 12:
        probe = login(proc, f"probe-{probes}", "wrong-pw-1")
        assert_unauthorized(probe)
        retry_after = int(probe.headers.get("Retry-After", "0"))
        if 0 < retry_after < 9:
            time.sleep(retry_after)
        probes += 1
    assert retry_after >= 9, f"the address was never locked for 8 s ({probes} probes)"
    locked = login(proc, "admin", proc.admin_password)
    assert_unauthorized(locked)
    assert int(locked.headers["Retry-After"]) >= 1
    with proc.client() as api:  # access keys are not throttled
        assert api.get("/users").status_code == 200
