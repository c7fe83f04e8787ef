"""Black-box tests of presigned URLs: issuing, using without credentials, and every refusal."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from tests.http.identitykit import Account, bearer, create_account, token_of, unique
from tests.http.test_buckets import RFC3339_MS, assert_error
from tests.serverproc import ServerProcess

BODY = b"presigned payload " * 100


@pytest.fixture
def bucket(api: httpx.Client, bucket_name: str) -> str:
    assert api.post("/buckets", json={"name": bucket_name}).status_code == 201
    assert api.put(f"/buckets/{bucket_name}/objects/doc.txt", content=BODY).status_code == 200
    return bucket_name


def presign(client: httpx.Client, bucket: str, key: str, **fields: Any) -> str:
    response = client.post("/presign", json={"bucket": bucket, "key": key, **fields})
    assert response.status_code == 200, response.text
    return str(response.json()["url"])


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


def with_path(url: str, path: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=path))


def test_presign_answers_url_method_and_expiry(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    before = time.time()
    response = api.post(
        "/presign", json={"bucket": bucket, "key": "doc.txt", "method": "GET", "expires_in": 600}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"url", "method", "expires_at", "expires_in"}
    assert body["method"] == "GET" and body["expires_in"] == 600
    assert RFC3339_MS.match(body["expires_at"])
    parts = urlsplit(body["url"])
    assert f"{parts.scheme}://{parts.netloc}" == server.url  # derived from the request
    assert parts.path == f"/api/v1/buckets/{bucket}/objects/doc.txt"
    query = dict(parse_qsl(parts.query))
    assert set(query) == {"X-Expires", "X-Credential", "X-Signature"}
    assert query["X-Credential"] == server.access_key
    assert before + 600 <= int(query["X-Expires"]) <= time.time() + 601
    assert len(query["X-Signature"]) == 64


def test_presigned_get_and_head_work_without_credentials(api: httpx.Client, bucket: str) -> None:
    got = httpx.get(presign(api, bucket, "doc.txt"))
    assert got.status_code == 200 and got.content == BODY
    head = httpx.head(presign(api, bucket, "doc.txt", method="HEAD"))
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(BODY))
    assert head.content == b""


def test_presigned_put_needs_the_signed_content_type(api: httpx.Client, bucket: str) -> None:
    url = presign(api, bucket, "up/photo.jpg", method="PUT", content_type="image/jpeg")
    for headers in ({}, {"Content-Type": "image/png"}):
        assert_error(httpx.put(url, content=b"jpeg", headers=headers), 403, "SignatureInvalid")
    assert_error(api.get(f"/buckets/{bucket}/objects/up/photo.jpg"), 404, "NoSuchKey")
    put = httpx.put(url, content=b"jpeg bytes", headers={"Content-Type": "image/jpeg"})
    assert put.status_code == 200, put.text
    assert put.json()["content_type"] == "image/jpeg" and put.json()["size_bytes"] == 10
    stored = api.get(f"/buckets/{bucket}/objects/up/photo.jpg")
    assert stored.content == b"jpeg bytes" and stored.headers["Content-Type"] == "image/jpeg"


def test_presigned_put_without_content_type_accepts_none(api: httpx.Client, bucket: str) -> None:
    url = presign(api, bucket, "raw.bin", method="PUT")
    assert_error(
        httpx.put(url, content=b"x", headers={"Content-Type": "text/plain"}),
        403,
        "SignatureInvalid",
    )
    assert httpx.put(url, content=b"raw").status_code == 200
    assert api.get(f"/buckets/{bucket}/objects/raw.bin").content == b"raw"


def test_keys_that_need_escaping_round_trip(api: httpx.Client, bucket: str) -> None:
    key = "dir/naïve file?#%+&=.txt"
    assert (
        api.put(f"/buckets/{bucket}/objects/{quote(key, safe='/')}", content=b"odd").status_code
        == 200
    )
    got = httpx.get(presign(api, bucket, key))
    assert got.status_code == 200 and got.content == b"odd"


def test_a_presigned_url_works_for_its_method_only(api: httpx.Client, bucket: str) -> None:
    url = presign(api, bucket, "doc.txt")
    for method in ("PUT", "HEAD", "DELETE"):
        response = httpx.request(method, url, content=b"x" if method == "PUT" else None)
        assert response.status_code == 403, (method, response.text)
        if method != "HEAD":
            assert_error(response, 403, "SignatureInvalid")
    put_url = presign(api, bucket, "doc.txt", method="PUT")
    assert_error(httpx.get(put_url), 403, "SignatureInvalid")
    assert api.get(f"/buckets/{bucket}/objects/doc.txt").content == BODY


def test_any_tampered_parameter_is_signature_invalid(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    other_bucket = unique("other")
    assert api.post("/buckets", json={"name": other_bucket}).status_code == 201
    assert api.put(f"/buckets/{other_bucket}/objects/doc.txt", content=b"other").status_code == 200
    assert api.put(f"/buckets/{bucket}/objects/doc2.txt", content=b"two").status_code == 200
    other_key = api.post("/access-keys", json={"name": "other"}).json()["access_key_id"]
    url = presign(api, bucket, "doc.txt")
    query = dict(parse_qsl(urlsplit(url).query))
    signature, expires = query["X-Signature"], int(query["X-Expires"])
    flipped = ("0" if signature[0] != "0" else "1") + signature[1:]
    tampered = [
        with_query(url, **{"X-Expires": str(expires + 3600)}),
        with_query(url, **{"X-Expires": str(expires - 1)}),
        with_query(url, **{"X-Credential": other_key}),
        with_query(url, **{"X-Signature": flipped}),
        with_query(url, **{"X-Signature": signature.upper()}),
        with_query(url, **{"X-Signature": ""}),
        with_path(url, f"/api/v1/buckets/{bucket}/objects/doc2.txt"),
        with_path(url, f"/api/v1/buckets/{other_bucket}/objects/doc.txt"),
        url.replace("X-Signature=", "X-Other="),
        url + "&X-Signature=" + signature,  # a second value
    ]
    for candidate in tampered:
        assert_error(httpx.get(candidate), 403, "SignatureInvalid")
    assert httpx.get(url).content == BODY  # the original still works


def test_presign_params_do_not_open_other_endpoints(
    server: ServerProcess, api: httpx.Client, bucket: str
) -> None:
    query = urlsplit(presign(api, bucket, "doc.txt")).query
    listing = httpx.get(f"{server.api}/buckets/{bucket}/objects?{query}")
    assert_error(listing, 401, "Unauthorized")


def test_an_expired_url_is_signature_expired(api: httpx.Client, bucket: str) -> None:
    url = presign(api, bucket, "doc.txt", expires_in=1)
    time.sleep(2.0)
    assert_error(httpx.get(url), 403, "SignatureExpired")


@pytest.mark.parametrize("expires_in", [0, -1, 604801, 1.5, "60", True, None])
def test_expires_in_out_of_bounds_is_invalid_argument(
    api: httpx.Client, bucket: str, expires_in: object
) -> None:
    response = api.post(
        "/presign", json={"bucket": bucket, "key": "doc.txt", "expires_in": expires_in}
    )
    assert_error(response, 400, "InvalidArgument")


@pytest.mark.parametrize("expires_in", [1, 604800])
def test_expires_in_bounds_are_accepted(api: httpx.Client, bucket: str, expires_in: int) -> None:
    response = api.post(
        "/presign", json={"bucket": bucket, "key": "doc.txt", "expires_in": expires_in}
    )
    assert response.status_code == 200 and response.json()["expires_in"] == expires_in


def test_presign_refuses_bad_requests(api: httpx.Client, bucket: str) -> None:
    assert_error(
        api.post("/presign", json={"bucket": bucket, "key": "doc.txt", "method": "DELETE"}),
        400,
        "InvalidArgument",
    )
    assert_error(api.post("/presign", json={"bucket": bucket}), 400, "InvalidArgument")
    assert_error(
        api.post("/presign", json={"bucket": unique("missing"), "key": "k"}), 404, "NoSuchBucket"
    )
    assert_error(api.post("/presign", json={"bucket": bucket, "key": ""}), 400, "InvalidKey")


def owned_bucket(server: ServerProcess, account: Account) -> str:
    name = unique("signer")
    with account.client(server) as client:
        assert client.post("/buckets", json={"name": name}).status_code == 201
        assert client.put(f"/buckets/{name}/objects/doc.txt", content=BODY).status_code == 200
    return name


def test_revoking_the_signing_key_kills_its_urls(server: ServerProcess, api: httpx.Client) -> None:
    signer = create_account(api, prefix="signer")
    name = owned_bucket(server, signer)
    with signer.client(server) as client:
        url = presign(client, name, "doc.txt")
    assert httpx.get(url).status_code == 200
    assert (
        api.patch(f"/access-keys/{signer.access_key}", json={"status": "revoked"}).status_code
        == 200
    )
    assert_error(httpx.get(url), 403, "AccessDenied")
    assert api.delete(f"/access-keys/{signer.access_key}").status_code == 204
    assert_error(httpx.get(url), 403, "AccessDenied")


def test_disabling_the_signer_kills_its_urls_signed_by_key_or_token(
    server: ServerProcess, api: httpx.Client
) -> None:
    signer = create_account(api, prefix="signer")
    name = owned_bucket(server, signer)
    with signer.client(server) as client:
        by_key = presign(client, name, "doc.txt")
    with bearer(server, token_of(server, signer)) as client:
        by_token = presign(client, name, "doc.txt")
    assert dict(parse_qsl(urlsplit(by_token).query))["X-Credential"] == signer.user_id
    for url in (by_key, by_token):
        assert httpx.get(url).content == BODY
    assert api.patch(f"/users/{signer.user_id}", json={"status": "disabled"}).status_code == 200
    for url in (by_key, by_token):
        assert_error(httpx.get(url), 403, "AccessDenied")
    assert api.patch(f"/users/{signer.user_id}", json={"status": "active"}).status_code == 200
    assert httpx.get(by_key).content == BODY  # the grant is tied to the signer's state


def test_presign_urls_use_the_public_url(server_factory: Callable[..., ServerProcess]) -> None:
    proc = server_factory(SERVICE_PUBLIC_URL="https://files.example.com/")
    with proc.client() as api:
        assert api.post("/buckets", json={"name": "pub"}).status_code == 201
        url = presign(api, "pub", "a b.txt")
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("https", "files.example.com")
    assert parts.path == "/api/v1/buckets/pub/objects/a%20b.txt"
    assert "//api" not in url
