"""Black-box tests of refused credentials: 401 and its challenge, 403, revoked keys,
disabled users.

Accounts and logins come from ``identitykit``.
"""

from __future__ import annotations

import http.client

import httpx
import pytest

from tests.http.identitykit import (
    anonymous,
    assert_unauthorized,
    bearer,
    create_account,
    login,
    token_of,
)
from tests.http.test_buckets import assert_error
from tests.serverproc import ADMIN_PASSWORD, ROOT_ACCESS_KEY, ServerProcess

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
