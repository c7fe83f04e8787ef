"""The identity tests' kit: accounts made through the API, logins, tokens, and the 401 check.

``Account``, ``create_account``, ``login``, ``token_of`` and ``bearer`` are shared with every
suite that needs a second user. Failed logins on a shared server are kept few: the
per-address throttle (20 failures from 127.0.0.1) would otherwise lock out every later login
of that server; the throttle itself is tested on fresh servers.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import httpx

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess

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
    """401 Unauthorized with the contract's challenge: Bearer alone to a failed login or a
    request that carried a Bearer token (no browser dialog), else both schemes."""
    assert_error(response, 401, "Unauthorized")
    challenge = response.headers.get("WWW-Authenticate", "")
    request = response.request
    sent = request.headers.get("Authorization", "").split(" ", 1)[0].lower()
    if request.url.path.endswith("/auth/login") or sent == "bearer":
        assert challenge == 'Bearer realm="service"'
    else:
        assert "Basic" in challenge and "Bearer" in challenge


def journal_sequence(api: httpx.Client) -> int:
    info = api.get("/system/info")
    assert info.status_code == 200, info.text
    return int(info.json()["journal"]["last_sequence"])
