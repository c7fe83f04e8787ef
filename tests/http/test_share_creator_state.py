"""A video share ends with its creator, like a presigned URL: once the user who made it is
disabled or deleted, or the access key it was made with is revoked, playback answers 403
AccessDenied (and plays again when the user is re-enabled)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.http.identitykit import Account, bearer, create_account, token_of
from tests.http.test_buckets import assert_error
from tests.http.videokit import fetch, make_clip, run_job, share
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_clip(tmp_path_factory.mktemp("clips") / "clip.mp4", seconds=1, audio=False)


@pytest.fixture
def account(api: httpx.Client) -> Account:
    return create_account(api, prefix="sharer")


@pytest.fixture
def job_of(
    server: ServerProcess, account: Account, clip: bytes, bucket_name: str
) -> Iterator[tuple[httpx.Client, str]]:
    """The account's client and a completed packaging job in a bucket it owns."""
    with account.client(server) as client:
        assert client.post("/buckets", json={"name": bucket_name}).status_code == 201
        put = client.put(f"/buckets/{bucket_name}/objects/clip.mp4", content=clip)
        assert put.status_code == 200, put.text
        yield client, run_job(client, bucket_name)["job_id"]


def set_user(api: httpx.Client, user_id: str, status: str) -> None:
    assert api.patch(f"/users/{user_id}", json={"status": status}).status_code == 200


def test_a_share_stops_while_its_creator_is_disabled(
    api: httpx.Client, account: Account, job_of: tuple[httpx.Client, str]
) -> None:
    client, job_id = job_of
    url = share(client, job_id)["hls_url"]
    assert fetch(url).status_code == 200
    set_user(api, account.user_id, "disabled")
    assert_error(fetch(url), 403, "AccessDenied")
    set_user(api, account.user_id, "active")
    assert fetch(url).status_code == 200


def test_a_share_stops_once_its_access_key_is_revoked(
    api: httpx.Client, account: Account, job_of: tuple[httpx.Client, str]
) -> None:
    client, job_id = job_of
    url = share(client, job_id)["hls_url"]
    other_key = api.post("/access-keys", json={"user_id": account.user_id}).json()
    assert fetch(url).status_code == 200
    revoked = api.patch(f"/access-keys/{account.access_key}", json={"status": "revoked"})
    assert revoked.status_code == 200
    assert_error(fetch(url), 403, "AccessDenied")
    # A share the same user makes with another key still plays.
    with httpx.Client(
        base_url=client.base_url, auth=(other_key["access_key_id"], other_key["secret_key"])
    ) as second:
        assert fetch(share(second, job_id)["hls_url"]).status_code == 200


def test_a_share_made_with_a_bearer_token_stops_when_its_user_is_deleted(
    server: ServerProcess, api: httpx.Client, account: Account, job_of: tuple[httpx.Client, str]
) -> None:
    _client, job_id = job_of
    with bearer(server, token_of(server, account)) as as_token:
        url = share(as_token, job_id)["hls_url"]
    assert fetch(url).status_code == 200
    deleted = api.delete(f"/users/{account.user_id}")
    assert deleted.status_code == 204, deleted.text
    assert_error(fetch(url), 403, "AccessDenied")


def test_a_deleted_access_key_ends_its_shares(
    api: httpx.Client, account: Account, job_of: tuple[httpx.Client, str]
) -> None:
    client, job_id = job_of
    url = share(client, job_id)["hls_url"]
    assert fetch(url).status_code == 200
    assert api.delete(f"/access-keys/{account.access_key}").status_code == 204
    assert_error(fetch(url), 403, "AccessDenied")
